"""Flags and the sleep-state gauge after each sleep and wake transition."""

import pytest

from fixtures.judging.assertions import reply_is, state_is
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)


def asleep(level: int) -> StateView:
    return StateView(is_sleeping=True, is_paused=True, gauge=SLEEP_GAUGE[level])


@pytest.mark.behaviour("flags/awake-baseline")
def test_awake_baseline(engine):
    state_is(engine, AWAKE, "awake engine")


@pytest.mark.behaviour("flags/sleep-level")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_level(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    state_is(engine, asleep(level), f"after /sleep?level={level}")


@pytest.mark.behaviour("flags/partial-wake")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake(engine, order):
    first, second = order
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up([first]), 200, {"status": "sleeping", "tags": [first]})
    state_is(engine, asleep(1), f"after waking only {first}")
    reply_is(engine.control.wake_up([second]), 200, {"status": "awake", "tags": [second]})
    state_is(engine, AWAKE, f"after waking {second} as well")


@pytest.mark.behaviour("flags/full-wake")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_full_wake(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    reply_is(engine.control.wake_up(), 200, {"status": "awake", "tags": None})
    state_is(engine, AWAKE, f"after a full wake from level {level}")


@pytest.mark.behaviour("flags/pause-resume")
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_resume(engine, mode):
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    paused = StateView(is_sleeping=True, is_paused=True, gauge=AWAKE_GAUGE)
    state_is(engine, paused, f"after /pause?mode={mode}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after /resume")


@pytest.mark.behaviour("flags/scheduling-tag")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_scheduling_tag(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    if level == 0:
        reply_is(engine.control.wake_up(["scheduling"]), 200, {"status": "awake"})
        # The gauge moves only on a wake that reports fully awake, which this one does.
        state_is(engine, AWAKE, "after tags=scheduling from level 0")
    else:
        reply_is(engine.control.wake_up(["scheduling"]), 200, {"status": "sleeping"})
        state_is(engine, asleep(level), f"after tags=scheduling from level {level}")
