"""Which weights a cut request ran on: a request in flight when /pause?mode=abort lands, before
a sync of checkpoint B, ends aborted holding only checkpoint A's tokens, never one computed
under B."""

import time

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import old_prefix_problems
from fixtures.observing.engine import IN_FLIGHT_PROMPT

PROMPT = IN_FLIGHT_PROMPT  # its run on A is the custody tests' reference too


@pytest.mark.behaviour("weights/aborted-request-old-version")
def test_aborted_request_old_version(goldens, checkpoints, engine, weights):
    size = engine.in_flight_tokens()
    reference_a = engine.reference(PROMPT, size)
    gen, _ = engine.start_in_flight(PROMPT, size=size)
    sent = time.monotonic()
    reply_is(engine.control.pause(mode="abort"), 200, {"status": "paused"})
    weights.sync(checkpoints["B"], "aborted-B")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert gen.done.wait(engine.request_timeout), f"the aborted request did not end: {gen.summary()}"
    problems = judges.standing_problems(judges.paused_request_problems(gen, "abort"),
                                        judges.ended_before(gen, sent, "pause"))
    problems += old_prefix_problems(gen.token_ids, reference_a, "the request the abort pause cut")
    assert not problems, "; ".join(problems)
