"""Which weights a request runs on: a request in flight when a keep pause lands, held across a
sync of checkpoint B and resumed, ends with tokens explained by one weight version each side
of the pause: its first tokens are checkpoint A's greedy run, and everything after is B's
greedy continuation of the prompt and those tokens, recomputed (pause clears the cache and
preempts running requests, so no KV cache computed under A is reused under B). This is
upstream's own check (examples/rl/rlhf_async_new_apis.py), against a stale-KV mix. A request
held short of its end that then ran on with only A's tokens fails too; only one that had all its
tokens when the pause settled says nothing (a harness error)."""

import time

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import held_request_problems, held_switch_candidates
from fixtures.observing.engine import IN_FLIGHT_PROMPT, SETTLE_S

PROMPT = IN_FLIGHT_PROMPT  # its run on A is the custody tests' reference too


def tokenize(engine, text: str) -> list[int]:
    reply = engine.control.call("POST", "/tokenize", json={"model": engine.gen.model, "prompt": text})
    if reply.status != 200 or not isinstance(reply.body, dict):
        raise HarnessError(f"/tokenize failed: {reply.describe()}")
    return list(reply.body["tokens"])


@pytest.mark.behaviour("weights/held-request-one-version")
def test_held_request_one_version(goldens, checkpoints, engine, weights):
    size = engine.in_flight_tokens()
    reference_a = engine.reference(PROMPT, size)  # an uninterrupted greedy run on A
    gen, _ = engine.start_in_flight(PROMPT, size=size)
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    seen_before = len(gen.token_ids)
    # The client's count lags the engine by the chunks in transit; a keep pause holds the
    # request, so the count once they have landed is what the engine held under A.
    time.sleep(SETTLE_S)
    held = len(gen.token_ids)
    weights.sync(checkpoints["B"], "held-B")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert gen.done.wait(engine.request_timeout), f"the held request did not finish: {gen.summary()}"
    assert gen.error is None and len(gen.token_ids) == size, (
        f"the held request did not run to its length after the resume: {gen.summary()}")
    tokens = list(gen.token_ids)
    candidates = held_switch_candidates(tokens, reference_a, seen_before, held) if held < size else []
    prompt_ids = tokenize(engine, PROMPT) if candidates else []
    if candidates:
        # The continuations must be computed afresh under B: a cached prefix the held request
        # left would carry whatever KV it ran on into the reference.
        reset = engine.control.call("POST", "/reset_prefix_cache")
        if reset.status != 200:
            raise HarnessError(f"/reset_prefix_cache failed: {reset.describe()}")
    continuations = {}
    # The switch is at the first token unlike A's run (or where the pause held it), or earlier
    # where B's first token happened to equal A's: every candidate down to what the client had
    # seen at the pause.
    for switch in candidates:
        cont = engine.gen.complete(prompt_ids + tokens[:switch], size - switch)  # type: ignore[arg-type]
        assert cont.error is None, f"B's continuation from token {switch} failed: {cont.summary()}"
        continuations[switch] = list(cont.token_ids)
    problems = held_request_problems(tokens, reference_a, size, seen_before, held, continuations)
    assert not problems, "; ".join(problems)
