"""The #44483 regression: a partial wake must not let the scheduler run a request."""

import pytest

from fixtures.client import wait_until
from fixtures.engine import HOLD_WINDOW_S
from fixtures.expect import finished_fully, reply_is

MAX_TOKENS = 32


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_holds_requests(engine, order):
    first, second = order
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up([first]), 200, {"status": "sleeping"})

    held = engine.gen.start("held across a partial wake", MAX_TOKENS)
    load = engine.wait_load(at_least=1)
    assert load >= 1, f"the request was never accepted: /load stayed at {load}"
    answered = wait_until(held.done.is_set, HOLD_WINDOW_S)
    assert not answered, (
        f"request answered while only {first!r} was awake: {held.summary()}"
    )
    assert engine.control.health() == 200, "/health must stay 200 while a request is held"

    reply_is(engine.control.wake_up([second]), 200, {"status": "awake"})
    assert held.done.wait(engine.request_timeout), "held request did not finish after full wake"
    finished_fully(held, MAX_TOKENS, f"held request after waking {second!r}")
