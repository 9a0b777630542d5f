"""sleep(mode="wait") with the engine core in the caller's process (LLM, multiprocessing off)."""

import pytest

from fixtures import delivery
from fixtures.offline import flags_are
from fixtures.offline_custody import drain_problems, observe_drain, start_in_flight


@pytest.mark.behaviour("custody/inproc-drain-before-offload")
@pytest.mark.offline_engines("LLM-MP0")
def test_inproc_drain_before_offload(offline):
    obs = observe_drain(offline, kind="cumulative", waiting=True)
    if obs.slept.raised is not None:
        pytest.fail(f"in-process {obs.slept.describe()}: this engine does not drain in-process "
                    f"(the drain is vLLM PR #56754)")
    problems = drain_problems(obs)
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("misuse/inproc-wait-refused-cleanly")
@pytest.mark.offline_engines("LLM-MP0")
def test_inproc_wait_refused_cleanly(offline):
    _, expected = start_in_flight(offline, "cumulative", "awake")
    slept = offline.call("sleep", level=1, mode="wait")
    if slept.raised is None:
        pytest.skip("this in-process engine drains instead of refusing; the drain is judged by "
                    "custody/inproc-drain-before-offload")
    problems = []
    if "wait" not in slept.raised["message"]:
        problems.append(f"{slept.describe()}: the error does not name the wait mode")
    problems += flags_are(offline, False, "after the refused sleep")
    if not offline.collect({"in-flight": "finished"}):
        problems.append("the request in flight did not finish after the refused sleep")
    flight = offline.deliveries()["in-flight"]
    problems += delivery.delivered_once("cumulative", flight.outputs, expected)
    assert not problems, "; ".join(problems) + f"; observed {flight.summary()}"
