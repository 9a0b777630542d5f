"""AsyncLLM.pause_generation on a request confirmed in flight, per mode."""

import time

import pytest

from fixtures.judging import delivery, judges
from fixtures.judging.offline_custody import start_in_flight, unless_finished_before
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S
from fixtures.observing.offline import returned

PHASES = ("running", "pausing", "paused", "resumed")


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_in_flight_offline(offline, mode):
    size, expected = start_in_flight(offline, "delta", "running")
    offline.phase("pausing")
    problems = returned(offline.call("pause_generation", then="paused", mode=mode))
    offline.settle(SETTLE_S)
    if mode == "keep":
        at_settle = offline.progress("in-flight")
        time.sleep(FREEZE_WINDOW_S)
        problems += judges.frozen(at_settle, offline.progress("in-flight"), size)
    problems += returned(offline.call("resume_generation", then="resumed"))
    if not offline.collect({"in-flight": "finished"}):
        problems.append(f"the request did not finish within {offline.timeout:.0f} s of the resume")
    outputs = offline.deliveries()["in-flight"].outputs
    if mode == "abort":
        problems += delivery.finished_before(outputs, "resumed", PHASES)
        got = delivery.assembled("delta", outputs)
        if not outputs or outputs[-1]["finish_reason"] != "abort" or len(got) >= size:
            problems.append(f"expected finish_reason 'abort' with fewer than {size} tokens; got "
                            f"{outputs[-1]['finish_reason'] if outputs else None!r} with {len(got)}")
    elif mode == "wait":
        problems += delivery.finished_before(outputs, "resumed", PHASES)
        problems += delivery.delivered_once("delta", outputs, expected)
    else:
        # The pause clears the cache (clear_cache defaults to True): the kept request is
        # preempted and recomputed, so only its length and finish reason are judged.
        got = delivery.assembled("delta", outputs)
        if len(got) != size or not outputs or outputs[-1]["finish_reason"] != "length":
            problems.append(f"expected {size} tokens and finish_reason 'length' after the resume; got "
                            f"{len(got)} and {outputs[-1]['finish_reason'] if outputs else None!r}")
    problems = unless_finished_before(problems, outputs, "running", size, "pause")
    assert not problems, "; ".join(problems)
