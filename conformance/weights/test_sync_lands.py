"""A sync lands: after a session pushing checkpoint B the engine serves B's golden output, and
pushing A back restores A's; the same through reload_weights from another weights_path and
through a worker extension's in-place reload reached by collective_rpc (the RL frameworks'
path today), and through vLLM's own trainer side (ipc; GPU targets only)."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.launching.environments import WORKER_EXTENSION
from fixtures.observing.weight_sync import vllm_trainer_client


def sync(engine, weights, path: str, checkpoint) -> None:
    """While paused: the trainer's sync (the suite's whole session, its version the checkpoint's
    label, or a user's --lifecycle-weight-sync; vLLM's own trainer side), or a reload."""
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    if path in ("session", "vllm-trainer"):
        weights.sync(checkpoint, checkpoint.label)
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
@pytest.mark.parametrize("path", ["session", "reload-from-path", "worker-extension", "vllm-trainer"])
def test_sync_lands(goldens, checkpoints, engine, weights, path, run_state):
    if path == "vllm-trainer":  # a GPU target: vLLM's ipc trainer; elsewhere a skip naming why
        weights = vllm_trainer_client(engine, run_state.config.python, 1)
    if path == "worker-extension" and WORKER_EXTENSION not in engine.server.config.args:
        pytest.skip(f"the server runs another --worker-extension-cls (--lifecycle-weight-sync "
                    f"{weights.path.spec if weights.path else ''}), not the suite's {WORKER_EXTENSION}")
    how = f"{path} ({weights.path.spec})" if path == "session" and weights.path else path
    sync(engine, weights, path, checkpoints["B"])
    assert_serves(engine, 1, "B", goldens, f"after the {how} sync of B")
    sync(engine, weights, path, checkpoints["A"])
    assert_serves(engine, 1, "A", goldens, f"after the {how} sync of A back")
