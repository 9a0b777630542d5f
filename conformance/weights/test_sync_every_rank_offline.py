"""Under data parallelism a sync through the Python API reaches every engine: AsyncLLM's weight
methods with a per-engine update_info list in packed chunks, each engine's own output asked for
by data_parallel_rank, each engine's worker initialised by the session's init, and each engine's
own load of its own entry (the host's log holds its engine processes' lines)."""

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


def push_alone(offline, w, checkpoint, version, n, step) -> list[str]:
    """Push in packed chunks; each engine's own loads as its worker logged them."""
    log = offline.server.log_path
    mark, first = server_log.mark(log), len(w.calls)
    w.push(checkpoint, version, engines=n, chunking=packed_chunks)
    lines = server_log.lines_since(log, mark)
    return (rank_load_problems(lines, expected_loads(w.calls[first:]), step)
            + rank_init_problems(lines, w.calls[first:], step))


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1")  # data parallelism needs the engine processes
def test_sync_reaches_every_rank_offline(goldens, checkpoints, topology, topology_offline,
                                         topology_offline_weights):
    offline, w, n = topology_offline, topology_offline_weights, topology.engines
    assert offline.call("pause_generation", mode="keep").raised is None, "pause_generation raised"
    loads = push_alone(offline, w, checkpoints["B"], "dp-offline-B", n, "the sync of B")
    assert offline.call("resume_generation").raised is None, "resume_generation raised"
    problems = serves_problems(per_rank(offline, n, "after-b"), "B", goldens, "after the sync of B")
    problems += version_problems({"get_weight_version()": w.version()}, "dp-offline-B",
                                 "after the sync of B")
    problems += loads
    loads = push_alone(offline, w, checkpoints["A"], "dp-offline-A", n, "the sync of A back")
    problems += serves_problems(per_rank(offline, n, "after-a"), "A", goldens, "after the sync of A back")
    problems += loads
    assert not problems, "; ".join(problems)
