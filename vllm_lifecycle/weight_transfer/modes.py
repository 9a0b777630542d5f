"""Which transfer a session uses, read from what the trainer sent to init_weight_transfer_engine.

The server carries one backend (`lifecycle_file`); for vLLM's own trainer side (ipc, nccl) to
drive a GPU server too, the backend hands ipc and nccl sessions to vLLM's worker-side engines.
The mode is chosen at init, not per chunk, so a chunk that lacks its mode's keys is refused by
that mode's parser. Plain Python: imported without torch or vLLM.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

FILE, IPC, NCCL = "file", "ipc", "nccl"
# Keys only vLLM's nccl init carries (vllm/distributed/weight_transfer/nccl_engine.py,
# NCCLWeightTransferInitInfo: a TCPStore rendezvous or a pre-minted ncclUniqueId).
NCCL_KEYS = frozenset({"master_address", "master_port", "world_size", "rank_offset",
                       "nccl_unique_id_b64"})
# vLLM's ipc trainer sends exactly {"packed": bool} (ipc_engine.py IPCTrainerWeightTransferEngine).
IPC_KEYS = frozenset({"packed"})


def init_mode(init_info: Mapping[str, Any]) -> str:
    """FILE (the suite's own chunks: a safetensors path and names), IPC or NCCL."""
    keys = set(init_info)
    if keys & NCCL_KEYS:
        return NCCL
    if keys and keys <= IPC_KEYS:
        return IPC
    return FILE
