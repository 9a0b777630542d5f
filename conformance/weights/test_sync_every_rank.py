"""Under data parallelism a sync reaches every engine: per-rank chunks, each rank's own output."""

import pytest

from fixtures.judging.expect import reply_is
from fixtures.judging.expect import serves as assert_serves
from fixtures.judging.weight_judges import version_problems


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2")
def test_sync_reaches_every_rank(goldens, checkpoints, topology, topology_engine, topology_weights):
    e, n, w = topology_engine, topology.engines, topology_weights
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
