"""sleep(mode="wait") with the engine core in the caller's process (LLM, multiprocessing off)."""

import pytest

from fixtures.judging.offline_custody import drain_problems
from fixtures.judging.offline_judges import inproc_wait_problems
from fixtures.observing.offline import Delivery
from fixtures.protocol.drain import observe_drain


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
    """Refused or accepted, sleep(mode="wait") in-process never costs the request in flight.

    An engine that drains in-process is judged here too (asleep on return, awake after the
    wake, the request whole): custody/inproc-drain-before-offload is tentative, and a lossy
    drain must not pass unnoticed while it is.
    """
    _, expected = offline.start_in_flight("cumulative", "awake")
    slept = offline.call("sleep", level=1, mode="wait")
    after_sleep = offline.flags()
    woke = after_wake = None
    if slept.raised is None:
        woke = offline.call("wake_up", then="woken")
        after_wake = offline.flags()
    finished = offline.collect({"in-flight": "finished"})
    flight = offline.deliveries().get("in-flight", Delivery("in-flight"))
    problems = inproc_wait_problems(slept, after_sleep, woke, after_wake, finished, flight, expected)
    assert not problems, "; ".join(problems) + f"; observed {flight.summary()}"
