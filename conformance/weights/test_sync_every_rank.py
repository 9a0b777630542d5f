"""Under data parallelism a sync reaches every engine: per-rank chunks, each rank's own output;
on a GPU target also through vLLM's own nccl trainer (a broadcast from rank 0)."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.judging.weight_judges import version_problems
from fixtures.observing.weight_sync import vllm_trainer_client


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2")
@pytest.mark.parametrize("trainer", ["suite", "vllm-trainer"])
def test_sync_reaches_every_rank(goldens, checkpoints, topology, topology_engine, topology_weights,
                                 trainer, run_state):
    e, n, w = topology_engine, topology.engines, topology_weights
    if trainer == "vllm-trainer":  # a GPU target: vLLM's nccl trainer; elsewhere a skip naming why
        w = vllm_trainer_client(e, run_state.config.python, n)
    reply_is(e.control.pause(mode="keep"), 200, {"status": "paused"})
    w.sync(checkpoints["B"], "dp-B", engines=n)
    reply_is(e.control.resume(), 200, {"status": "resumed"})
    assert_serves(e, n, "B", goldens, "after the sync of B")
    if w.commits_versions:  # a user's sync path need not set a version
        # /weight_info refuses to answer when the engines disagree: one answer is every engine's.
        problems = version_problems({"/weight_info": w.version()}, "dp-B", "after the sync of B")
        assert not problems, "; ".join(problems)

    reply_is(e.control.pause(mode="keep"), 200, {"status": "paused"})
    w.sync(checkpoints["A"], "dp-A", engines=n)
    reply_is(e.control.resume(), 200, {"status": "resumed"})
    assert_serves(e, n, "A", goldens, "after the sync of A back")
