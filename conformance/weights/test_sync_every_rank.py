"""Under data parallelism a sync reaches every engine: per-rank chunks, each rank's own output,
each rank's worker initialised by the session's init, and each rank's own load of its own entry
(its worker's log lines); on a GPU target also through vLLM's own nccl trainer (a broadcast from
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


def sync_packed(e, w, checkpoint, version, n, step):
    """Pause, sync with per-engine entries in packed chunks (a layer split across chunks),
    resume. Returns the judge of each engine's own loads as its worker logged them, for the
    caller to run after the outputs (a rank the sync missed fails on its output first)."""
    mark, first = server_log.mark(e.server.log_path), len(w.calls)
    reply_is(e.control.pause(mode="keep"), 200, {"status": "paused"})
    w.sync(checkpoint, version, engines=n, chunking=packed_chunks)
    reply_is(e.control.resume(), 200, {"status": "resumed"})

    def own_loads() -> list[str]:
        if w.path is not None:  # a user's or vLLM's trainer: not the suite's backend, no such lines
            return []
        lines = server_log.lines_since(e.server.log_path, mark)
        return (rank_load_problems(lines, expected_loads(w.calls[first:]), step)
                + rank_init_problems(lines, w.calls[first:], step))
    return own_loads


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2")
@pytest.mark.parametrize("trainer", ["suite", "vllm-trainer"])
def test_sync_reaches_every_rank(goldens, checkpoints, topology, topology_engine, topology_weights,
                                 trainer, run_state):
    e, n, w = topology_engine, topology.engines, topology_weights
    if trainer == "vllm-trainer":  # a GPU target: vLLM's nccl trainer; elsewhere a skip naming why
        w = vllm_trainer_client(e, run_state.config.python, n)
    own_loads = sync_packed(e, w, checkpoints["B"], "dp-B", n, "the sync of B")
    assert_serves(e, n, "B", goldens, "after the sync of B")
    if w.commits_versions:  # a user's sync path need not set a version
        # /weight_info refuses to answer when the engines disagree: one answer is every engine's.
        problems = version_problems({"/weight_info": w.version()}, "dp-B", "after the sync of B")
        assert not problems, "; ".join(problems)
    problems = own_loads()
    assert not problems, "; ".join(problems)

    own_loads = sync_packed(e, w, checkpoints["A"], "dp-A", n, "the sync of A back")
    assert_serves(e, n, "A", goldens, "after the sync of A back")
    problems = own_loads()
    assert not problems, "; ".join(problems)
