"""/resume must not become a door to a forward pass on released memory (issue: #44483 again)."""

import pytest

from fixtures import expect
from fixtures.expect import reply_is

TOKENS = 16


@pytest.mark.behaviour("safety/no-request-while-asleep")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_resume_while_asleep(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    resumed = engine.control.resume()
    if resumed.status >= 400:
        return  # refused: the scheduler stays paused, the memory stays safe
    request = engine.gen.start("sent after a resume while asleep", TOKENS)
    expect.held(engine, request, f"after /sleep?level={level} then /resume ({resumed.describe()})")
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    assert request.done.wait(engine.request_timeout), "the held request did not run after the wake"
