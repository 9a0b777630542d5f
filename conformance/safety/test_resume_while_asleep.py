"""/resume must not become a door to a forward pass on released memory (issue: #44483 again)."""

import time

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import reply_is
from fixtures.observing.engine import observe_state
from fixtures.spec.profiles import PROFILES

TOKENS = 16
POLL_S = 0.1


@pytest.mark.behaviour("safety/no-request-while-asleep")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_resume_while_asleep(engine, level):
    if PROFILES[engine.profile].sleep_requires_pause:
        reply_is(engine.control.pause("abort"), 200, {"status": "paused"})
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    before = observe_state(engine)
    resumed = engine.control.resume()
    after = observe_state(engine)
    if not 200 <= resumed.status < 300:
        problems = judges.resume_refusal_problems(resumed, before, after, engine.control.health())
        assert not problems, "; ".join(problems)
        return  # refused cleanly: the scheduler stays paused, the memory stays safe

    # Streamed, so a request that runs shows its tokens as they come.
    request = engine.gen.start("sent after a resume while asleep", TOKENS, stream=True)
    peak_load = 0
    deadline = time.monotonic() + engine.hold_window(TOKENS)
    while time.monotonic() < deadline and not request.done.is_set():
        peak_load = max(peak_load, engine.control.load())
        time.sleep(POLL_S)
    problems = judges.asleep_hold_problems(request, level, peak_load, engine.control.health(), resumed, after)
    assert not problems, "; ".join(problems)

    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    assert request.done.wait(engine.request_timeout), (
        f"the held request did not run within {engine.request_timeout:.0f} s of the full wake: "
        f"{request.summary()}"
    )
    problems = judges.full_run_problems(request, TOKENS)
    assert not problems, "the held request after the full wake: " + "; ".join(problems)
