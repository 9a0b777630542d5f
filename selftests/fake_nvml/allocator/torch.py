"""A stand-in for the part of torch fixtures/observing/device.py's ALLOCATOR uses, on the fake device.

Only the allocator process gets it (the fake interpreter puts this folder on its path): it
holds bytes against what the fake device has free (FAKE_NVML_STATE), and runs out like CUDA.
"""

from __future__ import annotations

import json
import os

uint8 = "uint8"
_held = 0


class _Cuda:
    @staticmethod
    def is_available() -> bool:
        return bool(os.environ.get("FAKE_NVML_STATE"))


cuda = _Cuda()


def empty(n: int, dtype: str = uint8, device: str = "cpu") -> bytes:
    global _held
    if device != "cuda" or dtype != uint8:
        raise TypeError(f"the fake torch allocates uint8 on cuda only, not {dtype} on {device}")
    with open(os.environ["FAKE_NVML_STATE"]) as f:
        state = json.load(f)
    free = int(state["total"]) - int(state.get("used_later", state["used"])) - _held
    if n > free:
        raise RuntimeError(f"CUDA out of memory. Tried to allocate {n} bytes ({free} free)")
    _held += n
    return b""
