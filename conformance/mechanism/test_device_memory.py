"""Device memory, read out of process with NVML: per level, across cycles, and for others.

GPU only. On a platform without device memory these skip with the reason; on a GPU platform
the suite cannot read (no nvidia-ml-py, ROCm) they are errors. Their judges run on synthetic
readings in the suite's own tests.
"""

import re

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.expect import reply_is, serving
from fixtures.observing import device
from thresholds import judges

CYCLES = 10
# The engine's startup report of what sleep manages: model weights and KV cache.
WEIGHTS_LINE = re.compile(r"Model loading took ([\d.]+) GiB")
KV_LINE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
GIB = 1 << 30


@pytest.fixture
def gpu_engine(runnable, target, request):
    """Skip before any server is touched when the platform has no device memory to read; on
    a GPU platform without a working reader, a harness error."""
    reason = device.device_skip_reason(target.platform)
    if reason:
        pytest.skip(reason)
    device.require_device_reader(target.platform)
    return request.getfixturevalue("engine")


def managed_sizes(engine) -> tuple[int, int]:
    """(weights bytes, KV cache bytes) from the engine's startup report."""
    log = engine.server.log_text()
    weights, kv = WEIGHTS_LINE.findall(log), KV_LINE.findall(log)
    if not weights or not kv:
        raise HarnessError(f"the server log does not report model and KV cache sizes "
                           f"({WEIGHTS_LINE.pattern!r}, {KV_LINE.pattern!r})")
    return int(float(weights[-1]) * GIB), int(float(kv[-1]) * GIB)


def used_bytes(engine) -> int:
    """Device memory in use on the engine's own device (under -n, the worker's)."""
    return device.device_used_bytes(device.engine_device(dict(engine.server.config.env)))


def staged_cycle(engine, level) -> judges.StagedWake:
    """Sleep at level 1 or 2, then wake the weights and the KV cache one at a time, reading
    the device after each step (level 2 reloads the weights before the KV cache wakes)."""
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    asleep = used_bytes(engine)
    reply_is(engine.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    after_weights = used_bytes(engine)
    if level == 2:
        reload = engine.control.call("POST", "/collective_rpc", json={"method": "reload_weights"})
        assert reload.status == 200, f"collective_rpc reload_weights failed: {reload.describe()}"
    reply_is(engine.control.wake_up(["kv_cache"]), 200, {"status": "awake"})
    return judges.StagedWake(asleep, after_weights, used_bytes(engine))


def sleep_then_wake(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    used = used_bytes(engine)
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    return used


@pytest.mark.behaviour("mechanism/device-memory-per-level")
def test_device_memory_per_level(gpu_engine, limits, measure):
    weights, kv_cache = managed_sizes(gpu_engine)
    before = used_bytes(gpu_engine)
    readings = judges.DeviceReadings(
        before=before,
        level0_asleep=sleep_then_wake(gpu_engine, 0),
        level1=staged_cycle(gpu_engine, 1),
        level2=staged_cycle(gpu_engine, 2),
        weights=weights,
        kv_cache=kv_cache,
    )
    measure(judges.device_memory_per_level(readings, limits))


@pytest.mark.behaviour("mechanism/device-memory-stable")
def test_device_memory_stable(gpu_engine, limits, measure, record_property):
    residual = [sleep_then_wake(gpu_engine, 1) for _ in range(CYCLES)]
    record_property("device_bytes_asleep_per_cycle", residual)
    measure(judges.device_memory_stable(residual, limits))


@pytest.mark.behaviour("mechanism/memory-freed-for-others")
def test_memory_freed_for_others(gpu_engine, limits, measure, run_state):
    before = used_bytes(gpu_engine)
    reply_is(gpu_engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    freed = before - used_bytes(gpu_engine)
    allocated = device.allocate_elsewhere(run_state.config.python, freed,
                                          device=device.engine_device(dict(gpu_engine.server.config.env)))
    reply_is(gpu_engine.control.wake_up(), 200, {"status": "awake"})
    serving(gpu_engine, "after another process used the freed memory")
    measure(judges.freed_for_others(freed, allocated, limits))
