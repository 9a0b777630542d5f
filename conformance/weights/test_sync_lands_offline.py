"""A sync lands through the Python API: LLM / AsyncLLM start_weight_update, update_weights,
finish_weight_update push checkpoint B (B's golden output, its version reported), and A back
restores A's; the version moves only at finish or by update_weight_version."""

import pytest

from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems, version_problems
from fixtures.observing.offline import run_to_end
from fixtures.observing.weight_sync import OfflineWeights


def output(offline, rid: str) -> dict[str, list[int]]:
    out = run_to_end(offline, rid, golden.HTTP_PROMPT, golden.TOKENS).outputs[-1]
    return {f"{offline.engine.name}": list(out["token_ids"])}


@pytest.mark.behaviour("weights/sync-lands")
def test_sync_lands_offline(goldens, checkpoints, offline, offline_weights):
    w: OfflineWeights = offline_weights
    paused = offline.engine.api == "AsyncLLM"  # LLM has no pause in 0.32/0.33: the caller owns its loop
    if paused:
        assert offline.call("pause_generation", mode="keep").raised is None, "pause_generation raised"
    w.push(checkpoints["B"], "offline-B")
    if paused:
        assert offline.call("resume_generation").raised is None, "resume_generation raised"
    problems = serves_problems(output(offline, "after-b"), "B", goldens, "after the sync of B")
    problems += version_problems({"get_weight_version()": w.version()}, "offline-B", "after the sync of B")
    uncommitted: list[str] = []
    w.push(checkpoints["A"], "offline-A", before_finish=lambda: uncommitted.append(w.version()))
    problems += serves_problems(output(offline, "after-a"), "A", goldens, "after the sync of A back")
    # Start and the chunks commit nothing: the version moves at finish, or by update_weight_version.
    problems += version_problems({"get_weight_version() before finish": uncommitted[0]}, "offline-B",
                                 "every chunk of A loaded, finish not yet called")
    problems += version_problems({"get_weight_version()": w.version()}, "offline-A",
                                 "after the sync of A back")
    w.set_version("offline-set")
    problems += version_problems({"get_weight_version()": w.version()}, "offline-set",
                                 "after update_weight_version('offline-set')")
    assert not problems, "; ".join(problems)
