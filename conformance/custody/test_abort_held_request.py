"""A request held by a keep pause and aborted by id ends at once and never runs after /resume."""

from __future__ import annotations

import time

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import held, reply_is
from fixtures.observing import metrics
from fixtures.observing.client import Generation, wait_until
from fixtures.observing.engine import SETTLE_S, Engine

MAX_TOKENS = 48
GENERATED = "vllm:generation_tokens_total"
LOAD_SETTLE_S = 5.0


def generated_tokens(engine: Engine) -> float:
    return sum(s.value for s in metrics.find(engine.control.metrics_text(), GENERATED))


def settled_load(engine: Engine) -> int:
    """/load once it reads 0, or its last value after LOAD_SETTLE_S."""
    seen = [engine.control.load()]

    def idle() -> bool:
        seen[0] = engine.control.load()
        return seen[0] == 0

    wait_until(idle, LOAD_SETTLE_S)
    return seen[0]


def held_abort_problems(gen: Generation) -> list[str]:
    """Ended by the abort with finish_reason 'abort' and not one token."""
    problems = []
    if gen.error is not None:
        problems.append(f"the aborted request raised {gen.error!r} instead of ending with 'abort'")
    if gen.finish_reason != "abort":
        problems.append(f"the aborted request ended with {gen.finish_reason!r}, expected 'abort'")
    if gen.token_ids or (gen.completion_tokens or 0) != 0:
        problems.append(f"the aborted request has tokens ({len(gen.token_ids)} ids, "
                        f"completion_tokens={gen.completion_tokens}), expected none")
    return [*problems, f"aborted: {gen.summary()}"] if problems else []


def after_resume_problems(generated: float, load: int, max_tokens: int) -> list[str]:
    """After /resume only the request not aborted may produce tokens, and nothing stays open."""
    problems = []
    if generated > max_tokens:
        problems.append(f"{generated:.0f} tokens generated after /resume, expected at most {max_tokens} "
                        f"(the request not aborted): the aborted request ran")
    if load != 0:
        problems.append(f"/load is {load} after both requests ended, expected 0")
    return problems


@pytest.mark.behaviour("custody/abort-held-request")
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
def test_abort_held_request(engine, stream):
    tag = "stream" if stream else "nonstream"
    reply_is(engine.control.pause("keep"), 200, {"status": "paused"})
    named = engine.gen.start(f"held then aborted {tag}", MAX_TOKENS, stream=stream,
                             request_id=f"held-aborted-{tag}")
    other = engine.gen.start(f"held then resumed {tag}", MAX_TOKENS, stream=stream,
                             request_id=f"held-kept-{tag}")
    held(engine, named, "/pause?mode=keep, the request to abort")
    assert not other.done.is_set(), f"the second held request was answered while paused: {other.summary()}"

    reply = engine.control.abort_requests([f"cmpl-held-aborted-{tag}-0"])
    reply_is(reply, 200, {"status": "aborted"})
    generated_at_resume = generated_tokens(engine)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert named.done.wait(engine.request_timeout), f"the aborted request never ended: {named.summary()}"
    assert other.done.wait(engine.request_timeout), (
        f"the request not aborted did not finish after /resume: {other.summary()}")
    # The one not aborted ran to its end after /resume: the aborted one, the same length, had
    # as long to run. Counters and /load settle once the responses are out.
    time.sleep(SETTLE_S)
    load = settled_load(engine)
    problems = held_abort_problems(named)
    problems += [f"the request not aborted: {p}" for p in judges.completion_problems(other, MAX_TOKENS)]
    problems += after_resume_problems(generated_tokens(engine) - generated_at_resume, load, MAX_TOKENS)
    assert not problems, "abort by id of a request held by /pause?mode=keep: " + "; ".join(problems)
