"""A request that arrives while the engine is paused: held or rejected, per profile."""

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import held, reply_is
from fixtures.spec.profiles import MODES, PROFILES

MAX_TOKENS = 48
# A rejection is immediate; an engine that holds the request instead is caught here, not
# after the full request timeout.
REJECT_WITHIN_S = 5.0


@pytest.mark.behaviour("custody/late-arrival")
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("mode", MODES)
def test_late_arrival(engine, mode, stream):
    fate = PROFILES[engine.profile].late_arrival[mode]
    prompt = f"arrives late during pause {mode}"
    reference = engine.reference(prompt, MAX_TOKENS)
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    late = engine.gen.start(prompt, MAX_TOKENS, stream=stream)

    if fate == "rejected":
        if not late.done.wait(REJECT_WITHIN_S):
            engine.control.resume()  # let the held request end before the test does
            late.done.wait(engine.request_timeout)
            pytest.fail(f"profile {engine.profile}, mode {mode}: no rejection within "
                        f"{REJECT_WITHIN_S:.0f} s; the request was held instead: {late.summary()}")
        problems = judges.rejection_problems(late)
        assert not problems, f"profile {engine.profile}, mode {mode}: " + "; ".join(problems)
        reply_is(engine.control.resume(), 200, {"status": "resumed"})
        retry = engine.complete(prompt, MAX_TOKENS, stream=stream)
        problems = judges.completion_problems(retry, MAX_TOKENS, reference=reference)
        assert not problems, "the same request after /resume: " + "; ".join(problems)
        return

    held(engine, late, f"profile {engine.profile}, /pause?mode={mode}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert late.done.wait(engine.request_timeout), "held request did not finish after /resume"
    problems = judges.completion_problems(late, MAX_TOKENS, reference=reference)
    assert not problems, "held request after /resume: " + "; ".join(problems)
