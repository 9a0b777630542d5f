"""Flags after each sleep and wake transition, through the Python API (LLM, AsyncLLM)."""

import pytest

from fixtures.judging.offline_judges import flag_problems, return_problems


@pytest.mark.behaviour("flags/sleep-level")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_level_offline(offline, level):
    problems = return_problems(offline.call("sleep", level=level))
    problems += flag_problems(offline.flags(), True, f"after sleep(level={level})")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/partial-wake")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_offline(offline, order):
    first, second = order
    problems = return_problems(offline.call("sleep", level=1))
    problems += return_problems(offline.call("wake_up", tags=[first]), False)
    problems += flag_problems(offline.flags(), True, f"after waking only {first}")
    problems += return_problems(offline.call("wake_up", tags=[second]), True)
    problems += flag_problems(offline.flags(), False, f"after waking {second} as well")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/full-wake")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_full_wake_offline(offline, level):
    problems = return_problems(offline.call("sleep", level=level))
    problems += return_problems(offline.call("wake_up"), True)
    problems += flag_problems(offline.flags(), False, f"after a full wake from level {level}")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/pause-resume")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_resume_offline(offline, mode):
    problems = return_problems(offline.call("pause_generation", mode=mode))
    problems += flag_problems(offline.flags(), True, f"after pause_generation(mode={mode!r})")
    problems += return_problems(offline.call("resume_generation"))
    problems += flag_problems(offline.flags(), False, "after resume_generation()")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/llm-pause-resume")
@pytest.mark.offline_engines("LLM-MP1", "LLM-MP0")
def test_llm_pause_resume(offline):
    problems = return_problems(offline.call("pause_generation", mode="abort"))
    if not problems:
        problems += flag_problems(offline.flags(), True, "after LLM.pause_generation()")
        problems += return_problems(offline.call("resume_generation"))
        problems += flag_problems(offline.flags(), False, "after LLM.resume_generation()")
    assert not problems, "; ".join(problems)
