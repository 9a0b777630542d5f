"""Under data or tensor parallelism a sync reaches every worker: per-worker entries in packed
chunks, each engine's own output (asked of it directly), each worker initialised by the session's
init, and each worker's own load of its own entry (its log lines); over HTTP on a GPU target also
through vLLM's own nccl trainer (a broadcast from rank 0)."""

import pytest

from fixtures.judging.protocol_judges import answer_problems
from fixtures.judging.weight_judges import (
    expected_loads,
    rank_init_problems,
    rank_load_problems,
    serves_problems,
    version_problems,
)
from fixtures.observing import server_log
from fixtures.observing.weight_sync import packed_chunks
from fixtures.protocol.weights import SESSION, VLLM_TRAINER


def sync_packed(lifecycle, w, path, checkpoint, version, topology, goldens, step) -> list[str]:
    """Pause, sync with per-worker entries in packed chunks (a layer split across chunks),
    resume; then every engine's output, and each worker's own loads as it logged them (a rank the
    sync missed fails on its output first)."""
    log = w.log_path  # None: a user's or vLLM's trainer, not the suite's backend: no such lines
    mark, first = server_log.mark(log) if log else 0, len(w.calls)
    problems = answer_problems(lifecycle.control.pause("keep"))
    w.load(path, checkpoint, version, engines=topology.workers, chunking=packed_chunks)
    problems += answer_problems(lifecycle.control.resume())
    problems += serves_problems(w.outputs(topology.engines), checkpoint.label, goldens, f"after {step}")
    if log:
        lines, calls, world = server_log.lines_since(log, mark), w.calls[first:], topology.tensor_parallel
        problems += (rank_load_problems(lines, expected_loads(calls), step, world)
                     + rank_init_problems(lines, calls, step, world))
    return problems


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2", "tp2")
@pytest.mark.offline_engines("AsyncLLM-MP1")  # data parallelism needs the engine processes
@pytest.mark.parametrize("trainer", ["suite", VLLM_TRAINER])
def test_sync_reaches_every_rank(topology_goldens, checkpoints, topology, lifecycle, weight_sync, trainer):
    w, goldens = weight_sync, topology_goldens
    path = SESSION if trainer == "suite" else VLLM_TRAINER
    w.require(path)  # vLLM's nccl trainer: a GPU target over HTTP; elsewhere a skip naming why
    problems = sync_packed(lifecycle, w, path, checkpoints["B"], "dp-B", topology, goldens, "the sync of B")
    if w.commits_versions:  # a user's sync path need not set a version
        # /weight_info refuses to answer when the engines disagree: one answer is every engine's.
        problems += version_problems({"the weight version": w.version()}, "dp-B", "after the sync of B")
    assert not problems, "; ".join(problems)
    problems = sync_packed(lifecycle, w, path, checkpoints["A"], "dp-A", topology, goldens,
                           "the sync of A back")
    assert not problems, "; ".join(problems)
