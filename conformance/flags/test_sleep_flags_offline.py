"""Flags after each sleep and wake transition, through the Python API (LLM, AsyncLLM)."""

import pytest

from fixtures.observing.offline import flags_are, returned


@pytest.mark.behaviour("flags/sleep-level")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_level_offline(offline, level):
    problems = returned(offline.call("sleep", level=level))
    problems += flags_are(offline, True, f"after sleep(level={level})")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/partial-wake")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_offline(offline, order):
    first, second = order
    problems = returned(offline.call("sleep", level=1))
    problems += returned(offline.call("wake_up", tags=[first]), False)
    problems += flags_are(offline, True, f"after waking only {first}")
    problems += returned(offline.call("wake_up", tags=[second]), True)
    problems += flags_are(offline, False, f"after waking {second} as well")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/full-wake")
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_full_wake_offline(offline, level):
    problems = returned(offline.call("sleep", level=level))
    problems += returned(offline.call("wake_up"), True)
    problems += flags_are(offline, False, f"after a full wake from level {level}")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/pause-resume")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_resume_offline(offline, mode):
    problems = returned(offline.call("pause_generation", mode=mode))
    problems += flags_are(offline, True, f"after pause_generation(mode={mode!r})")
    problems += returned(offline.call("resume_generation"))
    problems += flags_are(offline, False, "after resume_generation()")
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("flags/llm-pause-resume")
@pytest.mark.offline_engines("LLM-MP1", "LLM-MP0")
def test_llm_pause_resume(offline):
    problems = returned(offline.call("pause_generation", mode="abort"))
    if not problems:
        problems += flags_are(offline, True, "after LLM.pause_generation()")
        problems += returned(offline.call("resume_generation"))
        problems += flags_are(offline, False, "after LLM.resume_generation()")
    assert not problems, "; ".join(problems)
