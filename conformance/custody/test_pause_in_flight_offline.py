"""AsyncLLM.pause_generation on a request confirmed in flight, per mode."""

import time

import pytest

from fixtures.judging import delivery, judges
from fixtures.judging.offline_custody import finished_before_call
from fixtures.judging.offline_judges import return_problems
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S

PHASES = ("running", "pausing", "paused", "resumed")


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_in_flight_offline(offline, mode):
    size, expected = offline.start_in_flight("delta", "running")
    offline.phase("pausing")
    problems = return_problems(offline.call("pause_generation", then="paused", mode=mode))
    offline.settle(SETTLE_S)
    if mode == "keep":
        at_settle = offline.progress("in-flight")
        time.sleep(FREEZE_WINDOW_S)
        problems += judges.freeze_problems(at_settle, offline.progress("in-flight"), size)
    problems += return_problems(offline.call("resume_generation", then="resumed"))
    if not offline.collect({"in-flight": "finished"}):
        problems.append(f"the request did not finish within {offline.timeout:.0f} s of the resume")
    outputs = offline.deliveries()["in-flight"].outputs
    if mode == "abort":
        problems += delivery.late_finish_problems(outputs, "resumed", PHASES)
        got = delivery.assembled("delta", outputs)
        if not outputs or outputs[-1]["finish_reason"] != "abort" or len(got) >= size:
            problems.append(f"expected finish_reason 'abort' with fewer than {size} tokens; got "
                            f"{outputs[-1]['finish_reason'] if outputs else None!r} with {len(got)}")
    elif mode == "wait":
        problems += delivery.late_finish_problems(outputs, "resumed", PHASES)
        problems += delivery.exactly_once_problems("delta", outputs, expected)
    else:
        # The pause clears the cache (clear_cache defaults to True): the kept request is
        # preempted and recomputed, so only its length and finish reason are judged.
        got = delivery.assembled("delta", outputs)
        if len(got) != size or not outputs or outputs[-1]["finish_reason"] != "length":
            problems.append(f"expected {size} tokens and finish_reason 'length' after the resume; got "
                            f"{len(got)} and {outputs[-1]['finish_reason'] if outputs else None!r}")
    problems = judges.standing_problems(problems, finished_before_call(outputs, "running", size, "pause"))
    assert not problems, "; ".join(problems)
