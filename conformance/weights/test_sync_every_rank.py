"""Under data or tensor parallelism a sync reaches every worker: per-worker chunks, each engine's
own output, each worker initialised by the session's init, and each worker's own load of its own
entry (its log lines); on a GPU target also through vLLM's own nccl trainer (a broadcast from
rank 0)."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.judging.weight_judges import (
    expected_loads,
    rank_init_problems,
    rank_load_problems,
    version_problems,
)
from fixtures.observing import server_log
from fixtures.observing.weight_sync import packed_chunks, vllm_trainer_client


def sync_packed(e, w, checkpoint, version, topology, step):
    """Pause, sync with per-worker entries in packed chunks (a layer split across chunks),
    resume. Returns the judge of each worker's own loads as it logged them, for the caller to
    run after the outputs (a rank the sync missed fails on its output first)."""
    mark, first = server_log.mark(e.server.log_path), len(w.calls)
    reply_is(e.control.pause(mode="keep"), 200, {"status": "paused"})
    w.sync(checkpoint, version, engines=topology.workers, chunking=packed_chunks)
    reply_is(e.control.resume(), 200, {"status": "resumed"})

    def own_loads() -> list[str]:
        if w.path is not None:  # a user's or vLLM's trainer: not the suite's backend, no such lines
            return []
        lines = server_log.lines_since(e.server.log_path, mark)
        world = topology.tensor_parallel
        return (rank_load_problems(lines, expected_loads(w.calls[first:]), step, world)
                + rank_init_problems(lines, w.calls[first:], step, world))
    return own_loads


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2", "tp2")
@pytest.mark.parametrize("trainer", ["suite", "vllm-trainer"])
def test_sync_reaches_every_rank(topology_goldens, checkpoints, topology, topology_engine,
                                 topology_weights, trainer, run_state):
    e, n, w, goldens = topology_engine, topology.engines, topology_weights, topology_goldens
    if trainer == "vllm-trainer":  # a GPU target: vLLM's nccl trainer; elsewhere a skip naming why
        w = vllm_trainer_client(e, run_state.config.python, topology.workers)
    own_loads = sync_packed(e, w, checkpoints["B"], "dp-B", topology, "the sync of B")
    assert_serves(e, n, "B", goldens, "after the sync of B")
    if w.commits_versions:  # a user's sync path need not set a version
        # /weight_info refuses to answer when the engines disagree: one answer is every engine's.
        problems = version_problems({"/weight_info": w.version()}, "dp-B", "after the sync of B")
        assert not problems, "; ".join(problems)
    problems = own_loads()
    assert not problems, "; ".join(problems)

    own_loads = sync_packed(e, w, checkpoints["A"], "dp-A", topology, "the sync of A back")
    assert_serves(e, n, "A", goldens, "after the sync of A back")
    problems = own_loads()
    assert not problems, "; ".join(problems)
