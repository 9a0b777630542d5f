"""Calls made in the wrong state: answered plainly, the engine left serving."""

import pytest

from fixtures.judging.assertions import reply_is, serving, state_is
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)


@pytest.mark.behaviour("misuse/unknown-wake-tag")
@pytest.mark.parametrize(
    "tags",
    [["bogus"], ["weights,kv_cache"], ["weights", "bogus"]],
    ids=["bogus", "comma-joined", "valid-plus-bogus"],
)
def test_unknown_wake_tag(engine, tags):
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up(tags), 200, {"status": "sleeping"})
    # Nothing was woken: weights is still asleep, so waking it is a partial wake.
    reply_is(engine.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after the full wake")
    serving(engine)


@pytest.mark.behaviour("misuse/sleep-while-asleep")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_sleep_while_asleep(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    state_is(engine, StateView(True, True, SLEEP_GAUGE[level]), "after the second sleep")
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after the full wake")
    serving(engine)


@pytest.mark.behaviour("misuse/wake-while-awake")
def test_wake_while_awake(engine):
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after wake_up on an awake engine")
    serving(engine)


@pytest.mark.behaviour("misuse/resume-while-running")
def test_resume_while_running(engine):
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after resume on a running engine")
    serving(engine)
