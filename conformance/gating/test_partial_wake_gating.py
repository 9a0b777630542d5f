"""The #44483 regression: a partial wake must not let the scheduler run a request."""

import pytest

from fixtures.judging import assertions
from fixtures.judging.assertions import reply_is

MAX_TOKENS = 32


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_holds_requests(engine, order):
    first, second = order
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up([first]), 200, {"status": "sleeping"})

    request = engine.gen.start("held across a partial wake", MAX_TOKENS)
    assertions.held(engine, request, f"only {first!r} awake")

    reply_is(engine.control.wake_up([second]), 200, {"status": "awake"})
    assert request.done.wait(engine.request_timeout), "held request did not finish after full wake"
    assertions.finished_fully(request, MAX_TOKENS, f"held request after waking {second!r}")
