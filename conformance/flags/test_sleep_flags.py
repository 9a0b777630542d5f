"""Flags and the sleep-state gauge after each sleep and wake transition: each behaviour one
test over the lifecycle protocol, run over HTTP and through the Python API (LLM, AsyncLLM)."""

import pytest

from fixtures.judging.assertions import reply_is, state_is
from fixtures.judging.protocol_judges import answer_problems, state_problems
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView
from fixtures.protocol.capabilities import PAUSE
from fixtures.protocol.python_api import python_api_lifecycle

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)


@pytest.mark.behaviour("flags/awake-baseline")
def test_awake_baseline(engine):
    state_is(engine, AWAKE, "awake engine")


@pytest.mark.behaviour("flags/sleep-level")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_level(lifecycle, level):
    control, state = lifecycle.control, lifecycle.observe.state
    problems = answer_problems(control.sleep(level))
    problems += state_problems(state(), True, SLEEP_GAUGE[level], f"after sleep(level={level})")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/partial-wake")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake(lifecycle, order):
    control, state = lifecycle.control, lifecycle.observe.state
    first, second = order
    problems = answer_problems(control.sleep(1))
    problems += answer_problems(control.wake_up([first]), awake=False)
    problems += state_problems(state(), True, SLEEP_GAUGE[1], f"after waking only {first}")
    problems += answer_problems(control.wake_up([second]), awake=True)
    problems += state_problems(state(), False, AWAKE_GAUGE, f"after waking {second} as well")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/full-wake")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_full_wake(lifecycle, level):
    control, state = lifecycle.control, lifecycle.observe.state
    problems = answer_problems(control.sleep(level))
    problems += answer_problems(control.wake_up(), awake=True)
    problems += state_problems(state(), False, AWAKE_GAUGE, f"after a full wake from level {level}")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/pause-resume")
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_resume(lifecycle, mode):
    lifecycle.require(PAUSE)
    control, state = lifecycle.control, lifecycle.observe.state
    problems = answer_problems(control.pause(mode))
    problems += state_problems(state(), True, AWAKE_GAUGE, f"after pause(mode={mode!r})")
    problems += answer_problems(control.resume())
    problems += state_problems(state(), False, AWAKE_GAUGE, "after resume()")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/llm-pause-resume")
@pytest.mark.offline_engines("LLM-MP1", "LLM-MP0")
def test_llm_pause_resume(offline):
    # Not lifecycle.require(PAUSE): whether LLM has the pause is what this behaviour asks.
    llm = python_api_lifecycle(offline)
    control, state = llm.control, llm.observe.state
    problems = answer_problems(control.pause("abort"))
    if not problems:
        problems += state_problems(state(), True, AWAKE_GAUGE, "after LLM.pause_generation()")
        problems += answer_problems(control.resume())
        problems += state_problems(state(), False, AWAKE_GAUGE, "after LLM.resume_generation()")
    assert not problems, "; ".join(problems)


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
        state_is(engine, StateView(True, True, SLEEP_GAUGE[level]),
                 f"after tags=scheduling from level {level}")
