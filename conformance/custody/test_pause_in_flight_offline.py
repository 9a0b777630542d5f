"""AsyncLLM.pause_generation on requests confirmed in flight, per mode: on one engine, and on
every data-parallel engine at once (one request pinned to each by data_parallel_rank, each
judged alone)."""

import time

import pytest

from fixtures.judging import delivery, judges
from fixtures.judging.offline_custody import finished_before_call
from fixtures.judging.offline_judges import return_problems
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S
from fixtures.observing.offline import flight_rid

PHASES = ("running", "pausing", "paused", "resumed")


def fate_problems(mode: str, outputs: list[dict], size: int, expected: list[int]) -> list[str]:
    """How one request in flight must end once resumed (pure)."""
    got = delivery.assembled("delta", outputs)
    reason = outputs[-1]["finish_reason"] if outputs else None
    if mode == "abort":
        problems = delivery.late_finish_problems(outputs, "resumed", PHASES)
        if reason != "abort" or len(got) >= size:
            problems.append(f"expected finish_reason 'abort' with fewer than {size} tokens; got "
                            f"{reason!r} with {len(got)}")
        first = delivery.first_difference(got, expected[:len(got)])
        if first is not None:
            problems.append(f"token ids differ from the uninterrupted run from position {first} "
                            f"({len(got)} ids delivered)")
        return problems
    if mode == "wait":
        return (delivery.late_finish_problems(outputs, "resumed", PHASES)
                + delivery.exactly_once_problems("delta", outputs, expected))
    # The pause clears the cache (clear_cache defaults to True): the kept request is
    # preempted and recomputed, so only its length and finish reason are judged.
    if len(got) != size or reason != "length":
        return [f"expected {size} tokens and finish_reason 'length' after the resume; got "
                f"{len(got)} and {reason!r}"]
    return []


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.topologies("single", "dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.topology_params(offline_engine="AsyncLLM-MP1")  # data parallelism needs the engine processes
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_pause_in_flight_offline(topology_offline, topology, mode):
    offline = topology_offline

    def says(rank: int | None, problems: list[str]) -> list[str]:
        return problems if rank is None else [f"engine {rank}: {p}" for p in problems]

    size, expected = offline.start_flights("delta", "running", topology.ranks)
    offline.phase("pausing")
    problems = return_problems(offline.call("pause_generation", then="paused", mode=mode))
    offline.settle(SETTLE_S)
    if mode == "keep":
        at_settle = {rank: offline.progress(flight_rid(rank)) for rank in topology.ranks}
        time.sleep(FREEZE_WINDOW_S)
        for rank, settled in at_settle.items():
            problems += says(rank, judges.freeze_problems(settled, offline.progress(flight_rid(rank)), size))
    problems += return_problems(offline.call("resume_generation", then="resumed"))
    if not offline.collect({flight_rid(rank): "finished" for rank in topology.ranks}):
        problems.append(f"the requests did not all finish within {offline.timeout:.0f} s of the resume")
    seen = offline.deliveries()
    voids = []
    for rank in topology.ranks:
        outputs = seen[flight_rid(rank)].outputs if flight_rid(rank) in seen else []
        problems += says(rank, fate_problems(mode, outputs, size, expected[rank]))
        voids.append(finished_before_call(outputs, "running", size, "pause"))
    problems = judges.standing_problems(problems, next((v for v in voids if v is not None), None))
    assert not problems, "; ".join(problems)
