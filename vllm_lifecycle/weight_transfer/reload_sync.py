"""An example trainer-side sync path for `--lifecycle-weight-sync`, runnable on CPU:
`collective_rpc reload_weights` with the checkpoint's folder as `weights_path` (how a framework
without a transfer backend reloads a checkpoint it wrote to disk). A framework's own path has
the same shape: read `target`, move the tensors, raise `SyncRefused` when the engine refused.

    pytest conformance --lifecycle-behaviours weights/ \
        --lifecycle-weight-sync vllm_lifecycle.weight_transfer.reload_sync:reload_from_disk
"""

from __future__ import annotations

import requests

from vllm_lifecycle.weight_transfer.sync_path import SyncRefused, SyncTarget

TIMEOUT_S = 300.0


def reload_from_disk(target: SyncTarget) -> None:
    reply = requests.post(f"{target.url}/collective_rpc", timeout=TIMEOUT_S, json={
        "method": "reload_weights", "kwargs": {"weights_path": str(target.checkpoint)}})
    if reply.status_code != 200:
        raise SyncRefused(f"collective_rpc reload_weights of checkpoint {target.label} answered "
                          f"{reply.status_code}: {reply.text[:300]}")
