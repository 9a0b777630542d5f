"""Custody of requests in flight across /pause and /resume, per mode: on one engine, and on
every data-parallel engine at once (one request pinned to each, each judged alone)."""

import pytest

from fixtures.judging import custody
from fixtures.observing.engine import IN_FLIGHT_PROMPT
from fixtures.spec.profiles import MODES


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: one instance per mode (a several-engine server takes the whole machine).
@pytest.mark.topology_params(mode=tuple(MODES), stream=True, api="completions")
@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("mode", [*MODES, "keep-recompute"])
def test_pause_in_flight(topology_engine, topology, mode, stream, api):
    """keep holds the KV (clear_cache=false): output must equal the uninterrupted run exactly.
    keep-recompute uses /pause's default clear_cache=true: the request is preempted and
    recomputed, so it must finish in full, but its ids may take another numeric path. An
    aborted request's ids must be the start of its uninterrupted run."""
    engine = topology_engine
    size = custody.flight_size(engine, topology.ranks)
    exact = mode != "keep-recompute"
    references = engine.references(IN_FLIGHT_PROMPT, size, api, topology.ranks) if exact else {}
    flights = custody.start_flights(engine, topology.ranks, IN_FLIGHT_PROMPT, size, references,
                                    stream=stream, api=api)

    def pause():
        if mode == "keep":
            return engine.control.pause("keep", clear_cache=False)
        return engine.control.pause(mode.removesuffix("-recompute"))

    problems = custody.fates_problems(engine, mode.removesuffix("-recompute"), flights, pause,
                                      {"status": "paused"}, engine.control.resume)
    assert not problems, f"/pause?mode={mode}: " + "; ".join(problems)
