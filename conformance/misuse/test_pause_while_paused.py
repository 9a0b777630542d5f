"""/pause on an engine already paused: a repeat is accepted, a bad mode refused, still paused."""

from __future__ import annotations

import pytest

from fixtures.judging.assertions import reply_is, serving, state_is
from fixtures.observing.engine import AWAKE_GAUGE, StateView
from fixtures.spec.profiles import MODES

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
# A pause moves neither the gauge nor memory; is_sleeping reads true (paused or asleep).
PAUSED = StateView(is_sleeping=True, is_paused=True, gauge=AWAKE_GAUGE)


@pytest.mark.behaviour("misuse/invalid-mode-while-paused")
@pytest.mark.parametrize("mode", MODES)
def test_invalid_mode_while_paused(engine, mode):
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    reply = engine.control.pause("invalid")
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    assert reply.status == 400 and param == "query.mode", (
        f"/pause?mode=invalid while paused ({mode}): expected 400 with error.param 'query.mode'; "
        f"observed {reply.describe()}"
    )
    state_is(engine, PAUSED, f"after the refused /pause?mode=invalid while paused ({mode})")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after /resume")
    serving(engine)


@pytest.mark.behaviour("misuse/pause-while-paused")
@pytest.mark.parametrize("mode", MODES)
def test_pause_while_paused(engine, mode):
    for attempt in ("first", "second"):
        reply_is(engine.control.pause(mode), 200, {"status": "paused"})
        state_is(engine, PAUSED, f"after the {attempt} /pause?mode={mode}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after one /resume")
    serving(engine)
