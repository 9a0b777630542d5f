"""Which weights a request runs on: a request in flight when a keep pause lands, held across a
sync of checkpoint B and resumed, ends with tokens explained by one weight version each side
of the pause: its first tokens are checkpoint A's greedy run, and the tokens after are B's
greedy continuation of the prompt and those tokens, recomputed (pause clears the cache and
preempts running requests, so no KV cache computed under A is reused under B). This is
upstream's own check (examples/rl/rlhf_async_new_apis.py, which asks a fresh engine on the
new weights), against a stale-KV mix. Both references come from engines started on A and on B
(fixtures/judging/weight_references.py), never from this engine after the sync: a sync that
never landed would make its own continuation A's run, and pass. A request held short of its end
that then ran on with only A's tokens fails; only one that had all its tokens when the pause
settled, or was held past the switch points B was asked about, says nothing (a harness error)."""

import time

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import held_request_problems
from fixtures.judging.weight_references import HELD_PROMPT
from fixtures.observing.engine import SETTLE_S


@pytest.mark.behaviour("weights/held-request-one-version")
def test_held_request_one_version(goldens, references, checkpoints, engine, weights):
    size = engine.in_flight_tokens()
    gen, _ = engine.start_in_flight(HELD_PROMPT, size=size)
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
    problems = held_request_problems(list(gen.token_ids), references.held_a, size, seen_before, held,
                                     references.held_b)
    assert not problems, "; ".join(problems)
