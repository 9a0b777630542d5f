"""RFC #51476 §4 / PR #53082: sleep is a memory transition that needs a completed pause."""

import time

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S, received_tokens


@pytest.mark.behaviour("custody/refuse-unpaused-sleep")
def test_refuse_unpaused_sleep(engine):
    gen, _ = engine.start_in_flight("sleep without a pause")
    refused = engine.control.sleep(1)
    body = str(refused.body).lower()
    assert 400 <= refused.status < 500 and "pause" in body, (
        f"an un-paused sleep must be refused with a client error naming the missing pause; "
        f"observed {refused.describe()}"
    )
    time.sleep(SETTLE_S)
    before = received_tokens(gen)
    time.sleep(FREEZE_WINDOW_S)
    assert received_tokens(gen) > before or gen.finish_reason == "length", (
        f"the request in flight stopped after the refused sleep: {gen.summary()}"
    )
    assert engine.control.flags() == (False, False), "the refused sleep changed the engine state"
    reply_is(engine.control.pause("keep"), 200, {"status": "paused"})
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert gen.done.wait(engine.request_timeout), "the kept request did not finish after resume"
    assert gen.finish_reason == "length", f"kept request did not finish in full: {gen.summary()}"
