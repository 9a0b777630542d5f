"""A sync lands: after a sync of checkpoint B (under a keep pause where the transport has one)
the engine serves B's golden output, and a sync of A back restores A's; over HTTP the same
through reload_weights from another weights_path, through a worker extension's in-place reload
reached by collective_rpc (the RL frameworks' path today), and through vLLM's own trainer side
(ipc; GPU targets only). Where the sync commits a version, it moves at finish, not before, and
by update_weight_version."""

import pytest

from fixtures.judging.protocol_judges import answer_problems
from fixtures.judging.weight_judges import serves_problems, version_problems
from fixtures.protocol.capabilities import PAUSE
from fixtures.protocol.weights import SESSION, SYNC_PATHS


def land(lifecycle, weights, path, checkpoint, version, before_finish=None) -> list[str]:
    """One sync, held by a keep pause (LLM has none in 0.32/0.33: its caller owns the loop)."""
    held = PAUSE not in lifecycle.missing
    problems = answer_problems(lifecycle.control.pause("keep")) if held else []
    weights.load(path, checkpoint, version, before_finish=before_finish)
    return problems + (answer_problems(lifecycle.control.resume()) if held else [])


@pytest.mark.behaviour("weights/sync-lands")
@pytest.mark.parametrize("path", SYNC_PATHS)
def test_sync_lands(goldens, checkpoints, lifecycle, weight_sync, path):
    w = weight_sync
    w.require(path)
    how = w.how if path == SESSION else path
    versioned = path == SESSION and w.commits_versions  # a user's sync path need not set one

    def versions(expected: str, step: str, when: str = "") -> list[str]:
        return version_problems({f"the weight version{when}": w.version()}, expected, step)

    problems = land(lifecycle, w, path, checkpoints["B"], "lands-B")
    problems += serves_problems(w.outputs(), "B", goldens, f"after the {how} sync of B")
    problems += versions("lands-B", "after the sync of B") if versioned else []
    assert not problems, "; ".join(problems)
    # Start and the chunks commit nothing: the version moves at finish, or by update_weight_version.
    uncommitted: list[str] = []
    problems = land(lifecycle, w, path, checkpoints["A"], "lands-A",
                    (lambda: uncommitted.append(w.version())) if versioned else None)
    problems += serves_problems(w.outputs(), "A", goldens, f"after the {how} sync of A back")
    if versioned:
        problems += version_problems({"the weight version before finish": uncommitted[0]}, "lands-B",
                                     "every chunk of A loaded, finish not yet called")
        problems += versions("lands-A", "after the sync of A back")
        w.set_version("lands-set")
        problems += versions("lands-set", "after update_weight_version('lands-set')")
    assert not problems, "; ".join(problems)
