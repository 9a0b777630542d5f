"""A sync lands: after a session pushing checkpoint B the engine serves B's golden output, and
pushing A back restores A's; the same through reload_weights from another weights_path and
through a worker extension's in-place reload reached by collective_rpc (the RL frameworks'
path today)."""

import pytest

from fixtures.judging.expect import reply_is
from fixtures.judging.expect import serves as assert_serves


def sync(engine, weights, path: str, checkpoint) -> None:
    """While paused: a whole session (its version the checkpoint's label), or a reload."""
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    if path == "session":
        weights.push(checkpoint, checkpoint.label)
    elif path == "worker-extension":
        reload = weights.extension_load(checkpoint, "lifecycle_reload_tensors")
        assert reload.status == 200, (
            f"collective_rpc lifecycle_reload_tensors of {checkpoint.label} failed: {reload.describe()}")
    else:
        reload = weights.reload_from(checkpoint)
        assert reload.status == 200, (
            f"collective_rpc reload_weights from {checkpoint.label} failed: {reload.describe()}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})


@pytest.mark.behaviour("weights/sync-lands")
@pytest.mark.parametrize("path", ["session", "reload-from-path", "worker-extension"])
def test_sync_lands(goldens, checkpoints, engine, weights, path):
    sync(engine, weights, path, checkpoints["B"])
    assert_serves(engine, 1, "B", goldens, f"after the {path} sync of B")
    sync(engine, weights, path, checkpoints["A"])
    assert_serves(engine, 1, "A", goldens, f"after the {path} sync of A back")
