"""Under data parallelism a sync through the Python API reaches every engine: AsyncLLM's weight
methods with a per-engine update_info list, each engine's own output asked for by
data_parallel_rank."""

import pytest

from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems, version_problems
from fixtures.observing.offline import run_to_end


def per_rank(offline, engines: int, step: str) -> dict[str, list[int]]:
    return {f"engine {rank}": list(run_to_end(offline, f"{step}-rank{rank}", golden.HTTP_PROMPT,
                                               golden.TOKENS, rank=rank).outputs[-1]["token_ids"])
            for rank in range(engines)}


@pytest.mark.behaviour("weights/sync-reaches-every-rank")
@pytest.mark.topologies("dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1")  # data parallelism needs the engine processes
def test_sync_reaches_every_rank_offline(goldens, checkpoints, topology, topology_offline,
                                         topology_offline_weights):
    offline, w, n = topology_offline, topology_offline_weights, topology.engines
    assert offline.call("pause_generation", mode="keep").raised is None, "pause_generation raised"
    w.push(checkpoints["B"], "dp-offline-B", engines=n)
    assert offline.call("resume_generation").raised is None, "resume_generation raised"
    problems = serves_problems(per_rank(offline, n, "after-b"), "B", goldens, "after the sync of B")
    problems += version_problems({"get_weight_version()": w.version()}, "dp-offline-B",
                                 "after the sync of B")
    w.push(checkpoints["A"], "dp-offline-A", engines=n)
    problems += serves_problems(per_rank(offline, n, "after-a"), "A", goldens, "after the sync of A back")
    assert not problems, "; ".join(problems)
