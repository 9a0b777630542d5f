"""Mechanism judges: pure functions from recorded observations to thresholded Measurements.

Observe first, judge later: tests record readings (device bytes, RSS, durations, logprobs)
and these functions turn them into Measurements against the effective limits. They are
tested on synthetic readings, so the GPU paths are exercised without a GPU.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from thresholds import Limit, Measurement

Limits = Mapping[str, Limit]


def _get(limits: Limits, behaviour: str, name: str) -> Limit:
    return limits[f"{behaviour}:{name}"]


@dataclass(frozen=True)
class DeviceReadings:
    """Bytes used on the device, read out of process, at each point of a sleep/wake sequence."""

    before: int
    after_level0: int
    after_level1: int
    after_level2: int
    after_wake: int
    managed: int  # weights + KV cache, from the engine's own startup report


def device_memory_per_level(r: DeviceReadings, limits: Limits) -> list[Measurement]:
    b = "mechanism/device-memory-per-level"
    managed = max(r.managed, 1)
    return [
        _get(limits, b, "freed_fraction_level1").judge((r.before - r.after_level1) / managed),
        _get(limits, b, "freed_fraction_level2").judge((r.before - r.after_level2) / managed),
        _get(limits, b, "freed_bytes_level0").judge(max(0, r.before - r.after_level0)),
        _get(limits, b, "wake_return_fraction").judge(abs(r.after_wake - r.before) / max(r.before, 1)),
    ]


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
    first = max(rss_per_cycle[0], 1)
    return [
        _get(limits, b, "growth_per_cycle").judge(max(0.0, growth_per_cycle(rss_per_cycle)) / first),
        _get(limits, b, "total_growth").judge(max(0, rss_per_cycle[-1] - rss_per_cycle[0]) / first),
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


def logprob_drift(golden: Sequence[float], now: Sequence[float], limits: Limits) -> list[Measurement]:
    if len(golden) != len(now):
        raise ValueError(f"logprob series differ in length: {len(golden)} vs {len(now)}")
    drift = max((abs(a - b) for a, b in zip(golden, now, strict=True)), default=0.0)
    return [_get(limits, "mechanism/logprob-drift", "max_abs_logprob_diff").judge(drift)]


def freed_for_others(freed: int, allocated: int, limits: Limits) -> list[Measurement]:
    fraction = allocated / freed if freed > 0 else 0.0
    return [_get(limits, "mechanism/memory-freed-for-others", "allocatable_fraction").judge(fraction)]


def failures(measurements: Sequence[Measurement]) -> list[str]:
    return [m.describe() for m in measurements if not m.ok]
