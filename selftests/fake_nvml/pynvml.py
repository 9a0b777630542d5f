"""A stand-in for nvidia-ml-py's `pynvml`: only what fixtures/observing/device.py calls, one device.

Its readings are the fake GPU server's (selftests/fake_server.py, FAKE_POST=vllm), which
writes the bytes it maps to the file named by FAKE_NVML_STATE (and a test may write a
"utilization" percent there). Like NVML, a call before
nvmlInit (or after the matching nvmlShutdown) is an NVMLError, and so is a missing device.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

STATE_ENV = "FAKE_NVML_STATE"
_initialised = 0


class NVMLError(Exception):
    """pynvml's base error."""


@dataclass(frozen=True)
class c_nvmlMemory_t:  # noqa: N801 - pynvml's name
    total: int
    free: int
    used: int


@dataclass(frozen=True)
class c_nvmlUtilization_t:  # noqa: N801
    gpu: int
    memory: int


@dataclass(frozen=True)
class _Handle:
    index: int


def _require_init() -> None:
    if _initialised <= 0:
        raise NVMLError("Uninitialized")


def _state(handle: _Handle) -> dict:
    """The device's scripted readings (a handle NVML did not give out is an NVMLError)."""
    if not isinstance(handle, _Handle):
        raise NVMLError("Invalid Argument")
    with open(os.environ[STATE_ENV]) as f:
        return dict(json.load(f))


def nvmlInit() -> None:  # noqa: N802 - pynvml's names follow
    global _initialised
    path = os.environ.get(STATE_ENV)
    if not path or not os.path.exists(path):
        raise NVMLError(f"Driver Not Loaded (no device state at {STATE_ENV}={path!r})")
    _initialised += 1


def nvmlShutdown() -> None:  # noqa: N802
    global _initialised
    _require_init()
    _initialised -= 1


def nvmlDeviceGetCount() -> int:  # noqa: N802
    _require_init()
    return 1


def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:  # noqa: N802
    _require_init()
    if index != 0:
        raise NVMLError("Invalid Argument")
    return _Handle(index)


def nvmlDeviceGetMemoryInfo(handle: _Handle) -> c_nvmlMemory_t:  # noqa: N802
    _require_init()
    state = _state(handle)
    used, total = int(state["used"]), int(state["total"])
    return c_nvmlMemory_t(total=total, free=total - used, used=used)


def nvmlDeviceGetUtilizationRates(handle: _Handle) -> c_nvmlUtilization_t:  # noqa: N802
    _require_init()
    state = _state(handle)
    return c_nvmlUtilization_t(gpu=int(state.get("utilization", 0)), memory=0)
