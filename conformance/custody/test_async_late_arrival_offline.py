"""A request submitted through AsyncLLM while pause_generation(mode) is in force: held or
refused, per contract profile. On several data-parallel engines one request is pinned to each
(data_parallel_rank), and each meets its fate alone."""

import time

import pytest

from fixtures.judging.offline_judges import LateArrival, late_arrival_problems
from fixtures.observing.offline import OfflineClient
from fixtures.spec.profiles import MODES, PROFILES

PROMPT = "A request that reaches AsyncLLM while generation is paused for a weight update."
TOKENS = 48
# A refusal is immediate; an engine that holds the request instead is caught after this.
REJECT_WITHIN_S = 5.0


def _outputs(offline: OfflineClient, rid: str) -> tuple[list[dict], str | None]:
    seen = offline.deliveries().get(rid)
    return (list(seen.outputs), seen.error) if seen else ([], None)


def _rid(name: str, rank: int | None) -> str:
    return name if rank is None else f"{name}-{rank}"


@pytest.mark.behaviour("custody/async-late-arrival")
@pytest.mark.topologies("single", "dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.topology_params(offline_engine="AsyncLLM-MP1")  # data parallelism needs the engine processes
@pytest.mark.parametrize("mode", MODES)
def test_async_late_arrival(topology_offline, topology, run_state, mode):
    offline, ranks = topology_offline, topology.ranks
    fate = PROFILES[run_state.profile].late_arrival[mode]
    expected = {rank: offline.reference(PROMPT, TOKENS, rank) for rank in ranks}
    paused = offline.call("pause_generation", then="paused", mode=mode)
    window = REJECT_WITHIN_S if fate == "rejected" else offline.hold_window(TOKENS)
    for rank in ranks:
        offline.add(_rid("late", rank), PROMPT, TOKENS, kind="delta", rank=rank)
    began = time.monotonic()
    # "started": a token processed, or ended (an error ends it too).
    answered = offline.collect({_rid("late", rank): "started" for rank in ranks}, timeout=window)
    seconds = time.monotonic() - began if answered else None
    # Read before the resume is sent: all of this happened while paused.
    seen = {rank: (offline.progress(_rid("late", rank)), *_outputs(offline, _rid("late", rank)))
            for rank in ranks}
    resumed = offline.call("resume_generation", then="resumed")
    found = {rank: LateArrival(mode, fate, paused, window, seconds, progress, outputs, error, resumed,
                               reference=expected[rank])
             for rank, (progress, outputs, error) in seen.items()}
    for rank, obs in found.items():
        if obs.error_paused is None:
            offline.collect({_rid("late", rank): "finished"})
            obs.outputs, obs.error = _outputs(offline, _rid("late", rank))
        elif fate == "rejected":
            offline.add(_rid("retry", rank), PROMPT, TOKENS, kind="delta", rank=rank)
            offline.collect({_rid("retry", rank): "finished"})
            obs.retry_outputs, obs.retry_error = _outputs(offline, _rid("retry", rank))
    problems = [("" if rank is None else f"engine {rank}: ") + p
                for rank, obs in found.items() for p in late_arrival_problems(obs)]
    assert not problems, f"profile {run_state.profile}: " + "; ".join(problems)
