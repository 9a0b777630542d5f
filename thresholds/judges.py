"""Mechanism judges: pure functions from recorded readings (device bytes, RSS, durations,
logprobs) to Measurements against the effective limits, tested on synthetic readings, so the
GPU paths are exercised without a GPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from thresholds import Limit, Measurement

Limits = Mapping[str, Limit]


def _get(limits: Limits, behaviour: str, name: str) -> Limit:
    return limits[f"{behaviour}:{name}"]


class ReadingError(ValueError):
    """A reading the judge cannot use (missing, zero, malformed): the harness failed to
    observe, so the test is an error, never a pass or a failure."""


@dataclass(frozen=True)
class StagedWake:
    """Device bytes in use at one sleep level, woken tag by tag (read out of process)."""

    asleep: int  # after /sleep?level=N
    after_weights: int  # after /wake_up?tags=weights
    after_wake: int  # after /wake_up?tags=kv_cache: fully awake


@dataclass(frozen=True)
class DeviceReadings:
    """Bytes used on the device at each point of a sleep/wake sequence, and the sizes sleep
    manages, from the engine's own startup report."""

    before: int
    level0_asleep: int
    level1: StagedWake
    level2: StagedWake
    # Bytes of model weights; None where they are below what the reading resolves (a tiny
    # model's few MiB against host RSS noise on CPU), so nothing about them is judged.
    weights: int | None
    kv_cache: int  # bytes of KV cache


def device_memory_per_level(r: DeviceReadings, limits: Limits) -> list[Measurement]:
    """Level 0 releases nothing; levels 1 and 2 release the weights and the KV cache, each
    judged against its own size (a sum would let a KV-dominated engine keep its weights); a
    full wake returns to the pre-sleep use and brings the released bytes back."""
    b = "mechanism/device-memory-per-level"
    if (r.weights is not None and r.weights <= 0) or r.kv_cache <= 0 or r.before <= 0:
        raise ReadingError(f"device readings without sizes: before={r.before} weights={r.weights} "
                           f"kv_cache={r.kv_cache} bytes")
    weights = r.weights or 0
    found = [_get(limits, b, "freed_bytes_level0").judge(max(0, r.before - r.level0_asleep))]
    for level, w in ((1, r.level1), (2, r.level2)):
        if r.weights is not None:
            found.append(_get(limits, b, f"weights_released_fraction_level{level}").judge(
                (w.after_weights - w.asleep) / r.weights))
        found.append(_get(limits, b, f"kv_released_fraction_level{level}").judge(
            (w.after_wake - w.after_weights) / r.kv_cache))
        around = [_get(limits, b, "wake_return_fraction").judge(abs(w.after_wake - r.before) / r.before),
                  _get(limits, b, "wake_regained_fraction").judge(
                      (w.after_wake - w.asleep) / (weights + r.kv_cache))]
        if r.weights is not None:
            # The return measured in weights: a wake that skips the weights passes both
            # fractions above once the KV cache dwarfs them.
            around.append(_get(limits, b, "wake_return_of_weights").judge(
                abs(w.after_wake - r.before) / r.weights))
        found += [replace(m, name=f"{m.name} [level {level}]") for m in around]
    return found


def growth_per_cycle(series: Sequence[float]) -> float:
    """Least-squares slope of a per-cycle series (0 for fewer than two points)."""
    n = len(series)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(series) / n
    num = sum((i - mean_x) * (y - mean_y) for i, y in enumerate(series))
    den = sum((i - mean_x) ** 2 for i in range(n))
    return num / den


def host_rss_stable(rss_per_cycle: Sequence[int], limits: Limits) -> list[Measurement]:
    b = "mechanism/host-rss-stable"
    if len(rss_per_cycle) < 2 or any(v <= 0 for v in rss_per_cycle):
        # 0 is no reading, not no memory: judged, it would show no growth and pass.
        raise ReadingError(f"host RSS series unusable (need two or more positive readings): "
                           f"{list(rss_per_cycle)}")
    first = max(rss_per_cycle[0], 1)
    return [
        _get(limits, b, "growth_per_cycle").judge(max(0.0, growth_per_cycle(rss_per_cycle)) / first),
        _get(limits, b, "total_growth").judge(max(0, rss_per_cycle[-1] - rss_per_cycle[0]) / first),
    ]


@dataclass(frozen=True)
class SyncReading:
    """The whole server process tree after one pause -> sync -> resume cycle, and the cycle's
    duration as the trainer saw it."""

    rss_bytes: int
    threads: int
    open_fds: int
    seconds: float


def many_syncs_stable(readings: Sequence[SyncReading], limits: Limits) -> list[Measurement]:
    """Slopes per sync of threads, open file descriptors and resident memory (the last as a
    fraction of the first reading), and the median duration of the last third of the syncs
    against the first third's: a leak per session shows as a steady slope, a reload that
    slows with each session as a ratio."""
    b = "weights/many-syncs-stable"
    if len(readings) < 3 or any(r.rss_bytes <= 0 or r.threads <= 0 or r.seconds <= 0 for r in readings):
        raise ReadingError(f"sync series unusable (need three or more positive readings): {list(readings)}")
    third = len(readings) // 3
    first_time = statistics.median(r.seconds for r in readings[:third])
    last_time = statistics.median(r.seconds for r in readings[-third:])

    def slope(values: Sequence[float]) -> float:
        return max(0.0, growth_per_cycle(values))

    return [
        _get(limits, b, "syncs").judge(len(readings)),
        _get(limits, b, "threads_per_sync").judge(slope([r.threads for r in readings])),
        _get(limits, b, "open_fds_per_sync").judge(slope([r.open_fds for r in readings])),
        _get(limits, b, "rss_growth_per_sync").judge(
            slope([r.rss_bytes for r in readings]) / readings[0].rss_bytes),
        _get(limits, b, "sync_time_ratio").judge(last_time / first_time),
    ]


def device_memory_stable(residual_per_cycle: Sequence[int], limits: Limits) -> list[Measurement]:
    slope = max(0.0, growth_per_cycle(residual_per_cycle))
    return [_get(limits, "mechanism/device-memory-stable", "residual_growth_per_cycle").judge(slope)]


def latency(samples: Mapping[str, Sequence[float]], limits: Limits,
            source: str = "") -> list[Measurement]:
    """Median of each operation's samples against '<operation>_seconds'; source labels them."""
    found = []
    for op, values in samples.items():
        if values:
            m = _get(limits, "mechanism/latency", f"{op}_seconds").judge(statistics.median(values))
            found.append(replace(m, name=f"{m.name} [{source}]") if source else m)
    return found


def histogram_seconds(before: tuple[float, float] | None, after: tuple[float, float] | None,
                      metric: str, operation: str, calls: int = 1) -> float:
    """Server-side seconds of `calls` operations: the histogram's sum delta. mechanism/latency
    measures through it, so the engine MUST expose it: absent after the call, or a count that did
    not move by exactly `calls`, is a failure, never 0 s. Absent *before* an operation's first
    call is normal (a labelled child appears at its first observation) and reads as zero.
    """
    if after is None:
        raise AssertionError(f"mechanism/latency: the engine exposes no {metric} series for "
                             f"operation={operation!r} after {calls} such call(s); expected the "
                             f"histogram to record every call")
    count0, sum0 = before or (0.0, 0.0)
    counted = after[0] - count0
    if counted != calls:
        raise AssertionError(f"mechanism/latency: {metric}{{operation={operation!r}}} count moved "
                             f"by {counted:g} over {calls} call(s); expected {calls} (one per call)")
    return after[1] - sum0


def logprob_drift(golden: Sequence[float], now: Sequence[float], limits: Limits) -> list[Measurement]:
    if len(golden) != len(now):
        raise ValueError(f"logprob series differ in length: {len(golden)} vs {len(now)}")
    drift = max((abs(a - b) for a, b in zip(golden, now, strict=True)), default=0.0)
    return [_get(limits, "mechanism/logprob-drift", "max_abs_logprob_diff").judge(drift)]


def freed_for_others(freed: int, allocated: int | None, limits: Limits,
                     kv_cache: int | None = None) -> list[Measurement]:
    """What a level-1 sleep freed, against the KV cache it discards (when its size is known:
    an engine that frees nothing leaves nothing to allocate, and must not pass for it), and
    the share of it another process could allocate (`allocated` None: nothing was freed, so
    no allocation was tried; judged by the first measurement alone)."""
    b = "mechanism/memory-freed-for-others"
    found = []
    if kv_cache:
        found.append(_get(limits, b, "kv_released_fraction").judge(max(0, freed) / kv_cache))
    if allocated is not None or not kv_cache:
        fraction = (allocated or 0) / freed if freed > 0 else 0.0
        found.append(_get(limits, b, "allocatable_fraction").judge(fraction))
    return found


def failures(measurements: Sequence[Measurement]) -> list[str]:
    return [m.describe() for m in measurements if not m.ok]
