"""Engine memory read out of process: per level, across cycles, and for others.

On a GPU the device is read through NVML; on a CPU target the engine's device is host memory,
read as the resident memory of the server's process tree, and another process allocates host
memory. A platform without a reader skips with the reason; a GPU platform the suite cannot read
(no nvidia-ml-py, ROCm) is an error. Their judges run on synthetic readings in the suite's own
tests.
"""

import re

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is, serving
from fixtures.launching.external import needs_own_process
from fixtures.observing import device
from thresholds import judges

CYCLES = 10
# The engine's startup report of what sleep manages: model weights and KV cache. A CPU worker
# reports the KV cache space it was given, and the checkpoint's size instead of the weights'.
WEIGHTS_LINE = re.compile(r"Model loading took ([\d.]+) GiB")
KV_LINE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
CPU_KV_LINE = re.compile(r"Explicitly set \(([\d.]+)/[\d.]+\) GiB for KV cache")
CPU_CHECKPOINT_LINE = re.compile(r"Checkpoint size: ([\d.]+) GiB")
GIB = 1 << 30
# Host RSS moves by a few MiB with every request and allocator decision: weights smaller than
# this are not judged on CPU (their fractions would measure noise), the KV cache still is.
CPU_WEIGHTS_RESOLUTION = 256 << 20


@pytest.fixture
def memory_engine(runnable, target, request):
    """Skip before any server is touched when the platform has no memory reader; on a GPU
    platform without a working reader, a harness error. On CPU the readings are the server's
    own processes, so an external target skips."""
    reason = device.device_skip_reason(target.platform)
    if reason:
        pytest.skip(reason)
    device.require_device_reader(target.platform)
    engine = request.getfixturevalue("engine")
    if engine.platform == "cpu":
        needs_own_process(engine.server)
    return engine


def _last(pattern: re.Pattern[str], log: str) -> float | None:
    found = pattern.findall(log)
    return float(found[-1]) if found else None


def managed_sizes(engine) -> tuple[int | None, int]:
    """(weights bytes, KV cache bytes) from the engine's startup report; weights None on CPU
    when below what host RSS resolves."""
    log = engine.server.log_text()
    if engine.platform == "cpu":
        kv, checkpoint = _last(CPU_KV_LINE, log), _last(CPU_CHECKPOINT_LINE, log)
        if kv is None or checkpoint is None:
            raise HarnessError(f"the server log does not report the KV cache space and checkpoint "
                               f"size ({CPU_KV_LINE.pattern!r}, {CPU_CHECKPOINT_LINE.pattern!r})")
        weights = int(checkpoint * GIB)
        return (weights if weights >= CPU_WEIGHTS_RESOLUTION else None), int(kv * GIB)
    weights, kv = _last(WEIGHTS_LINE, log), _last(KV_LINE, log)
    if weights is None or kv is None:
        raise HarnessError(f"the server log does not report model and KV cache sizes "
                           f"({WEIGHTS_LINE.pattern!r}, {KV_LINE.pattern!r})")
    return int(weights * GIB), int(kv * GIB)


def used_bytes(engine) -> int:
    """Engine memory in use: the engine's own device (under -n, the worker's) through NVML, or
    on CPU the resident memory of the server's process tree."""
    if engine.platform == "cpu":
        return device.tree_rss_bytes(engine.server.proc.pid)
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
def test_device_memory_per_level(memory_engine, limits, measure, note):
    weights, kv_cache = managed_sizes(memory_engine)
    if weights is None:
        note(f"weights not judged: the checkpoint is under {CPU_WEIGHTS_RESOLUTION >> 20} MiB, "
             f"below what host RSS resolves; the KV cache ({kv_cache >> 20} MiB) is judged")
    before = used_bytes(memory_engine)
    readings = judges.DeviceReadings(
        before=before,
        level0_asleep=sleep_then_wake(memory_engine, 0),
        level1=staged_cycle(memory_engine, 1),
        level2=staged_cycle(memory_engine, 2),
        weights=weights,
        kv_cache=kv_cache,
    )
    measure(judges.device_memory_per_level(readings, limits))


@pytest.mark.behaviour("mechanism/device-memory-stable")
def test_device_memory_stable(memory_engine, limits, measure, record_property):
    residual = [sleep_then_wake(memory_engine, 1) for _ in range(CYCLES)]
    record_property("device_bytes_asleep_per_cycle", residual)
    measure(judges.device_memory_stable(residual, limits))


@pytest.mark.behaviour("mechanism/memory-freed-for-others")
def test_memory_freed_for_others(memory_engine, limits, measure, run_state):
    _, kv_cache = managed_sizes(memory_engine)
    before = used_bytes(memory_engine)
    reply_is(memory_engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    freed = before - used_bytes(memory_engine)
    allocated = None
    if freed > 0:  # nothing freed: nothing to hand another process (judged as such)
        allocated = device.allocate_elsewhere(
            run_state.config.python, freed, host=memory_engine.platform == "cpu",
            device=device.engine_device(dict(memory_engine.server.config.env)))
    reply_is(memory_engine.control.wake_up(), 200, {"status": "awake"})
    serving(memory_engine, "after another process used the freed memory")
    measure(judges.freed_for_others(freed, allocated, limits, kv_cache))
