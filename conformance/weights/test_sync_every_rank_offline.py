"""Under data or tensor parallelism a sync through the Python API reaches every worker: AsyncLLM's
weight methods with a per-worker update_info list in packed chunks, each engine's own output asked
for by data_parallel_rank, each worker initialised by the session's init, and each worker's own
load of its own entry (the host's log holds its engine processes' lines)."""

import pytest

from fixtures.judging import golden
from fixtures.judging.weight_judges import (
    expected_loads,
    rank_init_problems,
    rank_load_problems,
    serves_problems,
    version_problems,
)
from fixtures.observing import server_log
from fixtures.observing.offline import run_to_end
from fixtures.observing.weight_sync import packed_chunks


def per_rank(offline, engines: int, step: str) -> dict[str, list[int]]:
    return {f"engine {rank}": list(run_to_end(offline, f"{step}-rank{rank}", golden.HTTP_PROMPT,
                                               golden.TOKENS, rank=rank).outputs[-1]["token_ids"])
            for rank in range(engines)}


def push_alone(offline, w, checkpoint, version, topology, step) -> list[str]:
    """Push in packed chunks, one entry per worker; each worker's own loads as it logged them."""
    log = offline.server.log_path
    mark, first = server_log.mark(log), len(w.calls)
    w.push(checkpoint, version, engines=topology.workers, chunking=packed_chunks)
    lines = server_log.lines_since(log, mark)
    world = topology.tensor_parallel
    return (rank_load_problems(lines, expected_loads(w.calls[first:]), step, world)
            + rank_init_problems(lines, w.calls[first:], step, world))


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2", "tp2")
@pytest.mark.offline_engines("AsyncLLM-MP1")  # data parallelism needs the engine processes
def test_sync_reaches_every_rank_offline(topology_goldens, checkpoints, topology, topology_offline,
                                         topology_offline_weights):
    offline, w, n, goldens = topology_offline, topology_offline_weights, topology.engines, topology_goldens
    assert offline.call("pause_generation", mode="keep").raised is None, "pause_generation raised"
    loads = push_alone(offline, w, checkpoints["B"], "dp-offline-B", topology, "the sync of B")
    assert offline.call("resume_generation").raised is None, "resume_generation raised"
    problems = serves_problems(per_rank(offline, n, "after-b"), "B", goldens, "after the sync of B")
    problems += version_problems({"get_weight_version()": w.version()}, "dp-offline-B",
                                 "after the sync of B")
    problems += loads
    loads = push_alone(offline, w, checkpoints["A"], "dp-offline-A", topology, "the sync of A back")
    problems += serves_problems(per_rank(offline, n, "after-a"), "A", goldens, "after the sync of A back")
    problems += loads
    assert not problems, "; ".join(problems)
