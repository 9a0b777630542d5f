"""Custody of requests in flight through /sleep?mode=..., at every level: on one engine, and on
every data-parallel engine at once (one request pinned to each, each judged alone)."""

import pytest

from fixtures.judging import custody
from fixtures.observing.engine import IN_FLIGHT_PROMPT
from fixtures.observing.flights import flight_size, start_flights
from fixtures.spec.profiles import MODES


@pytest.mark.behaviour("custody/sleep-in-flight")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: one instance per mode, at level 1 (weights offloaded, the KV cache dropped).
@pytest.mark.topology_params(level=1)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_in_flight(topology_engine, topology, level, mode):
    """At levels 1 and 2 sleep clears the prefix cache, which preempts a kept request: it is
    recomputed after the wake, so its ids are compared only at level 0. An aborted request's
    ids must be the start of its uninterrupted run."""
    engine = topology_engine
    size = flight_size(engine, topology.ranks)
    exact = mode != "keep" or level == 0
    references = engine.references(IN_FLIGHT_PROMPT, size, ranks=topology.ranks) if exact else {}
    flights = start_flights(engine, topology.ranks, IN_FLIGHT_PROMPT, size, references)

    def sleep():
        return engine.control.sleep(level, mode)

    problems = custody.fates_problems(engine, mode, flights, sleep, {"status": "sleeping", "level": level},
                                      engine.control.wake_up)
    assert not problems, f"/sleep?level={level}&mode={mode}: " + "; ".join(problems)
