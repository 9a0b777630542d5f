"""Device memory, read out of process with NVML: per level, across cycles, and for others.

GPU only. On a platform without device memory these skip with the reason; their judges run
on synthetic readings in the suite's own tests.
"""

import re

import pytest

from fixtures import device
from fixtures.errors import HarnessError
from fixtures.expect import reply_is, serving
from thresholds import judges

CYCLES = 10
# The engine's startup report of what sleep manages: model weights and KV cache.
WEIGHTS_LINE = re.compile(r"Model loading took ([\d.]+) GiB")
KV_LINE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
GIB = 1 << 30


@pytest.fixture
def gpu_engine(runnable, target, request):
    """Skip before any server is touched when the platform has no device memory to read."""
    reason = device.device_skip_reason(target.platform)
    if reason:
        pytest.skip(reason)
    return request.getfixturevalue("engine")


def managed_bytes(engine) -> int:
    log = engine.server.log_text()
    weights, kv = WEIGHTS_LINE.findall(log), KV_LINE.findall(log)
    if not weights or not kv:
        raise HarnessError("the server log does not report model and KV cache sizes")
    return int((float(weights[-1]) + float(kv[-1])) * GIB)


def sleep_then_wake(engine, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    used = device.device_used_bytes()
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    return used


@pytest.mark.behaviour("mechanism/device-memory-per-level")
def test_device_memory_per_level(gpu_engine, limits, measure):
    before = device.device_used_bytes()
    readings = judges.DeviceReadings(
        before=before,
        after_level0=sleep_then_wake(gpu_engine, 0),
        after_level1=sleep_then_wake(gpu_engine, 1),
        after_level2=sleep_then_wake(gpu_engine, 2),
        after_wake=device.device_used_bytes(),
        managed=managed_bytes(gpu_engine),
    )
    gpu_engine.control.call("POST", "/collective_rpc", json={"method": "reload_weights"})
    measure(judges.device_memory_per_level(readings, limits))


@pytest.mark.behaviour("mechanism/device-memory-stable")
def test_device_memory_stable(gpu_engine, limits, measure, record_property):
    residual = [sleep_then_wake(gpu_engine, 1) for _ in range(CYCLES)]
    record_property("device_bytes_asleep_per_cycle", residual)
    measure(judges.device_memory_stable(residual, limits))


@pytest.mark.behaviour("mechanism/memory-freed-for-others")
def test_memory_freed_for_others(gpu_engine, limits, measure, run_state):
    before = device.device_used_bytes()
    reply_is(gpu_engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    freed = before - device.device_used_bytes()
    allocated = device.allocate_elsewhere(run_state.config.python, freed)
    reply_is(gpu_engine.control.wake_up(), 200, {"status": "awake"})
    serving(gpu_engine, "after another process used the freed memory")
    measure(judges.freed_for_others(freed, allocated, limits))
