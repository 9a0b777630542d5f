"""Which transfer a session uses, read from what the trainer sent to init_weight_transfer_engine.

The suite's server carries one backend (`lifecycle_file`), and vLLM builds one engine per worker
from it. To let vLLM's own trainer side (the ipc and nccl backends' `TrainerWeightTransferEngine`)
drive a GPU server as well, the backend takes the mode from the init message and hands ipc and
nccl sessions to vLLM's own worker-side engines. The mode is chosen at init, not per chunk: a
chunk that lacks the keys of its mode must reach that mode's parser and be refused there.

Plain Python: the self-tests and the suite's process import it without torch or vLLM.
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
