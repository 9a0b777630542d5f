"""Threshold resolution and the mechanism judges, on synthetic readings (GPU paths included)."""

from __future__ import annotations

import math

import pytest

from thresholds import (
    ThresholdError,
    file_digest,
    judges,
    limits_digest,
    load_limits,
    parse_limits,
    parse_overrides,
    policy,
)

GIB = 1 << 30
CPU = {"platform": "cpu", "runner": "MRV1", "model_size": "tiny"}
LIMITS = load_limits(CPU)


def test_every_limit_has_unit_comparator_and_reason_and_the_policy_is_written():
    assert LIMITS and all(v.unit and v.reason and v.comparator for v in LIMITS.values())
    assert set(policy()) == {"contract", "mechanism"}
    assert len(file_digest()) == 64


def test_most_specific_override_wins():
    large = load_limits({"platform": "cuda", "runner": "MRV2", "model_size": "large"})
    assert large["mechanism/latency:wake_seconds"].limit == 9.0
    assert LIMITS["mechanism/latency:wake_seconds"].limit == 2.0
    assert limits_digest(large) != limits_digest(LIMITS)


def test_command_line_override_is_applied_marked_and_changes_the_hash():
    changed = load_limits(CPU, parse_overrides("mechanism/latency:wake_seconds=5"))
    entry = changed["mechanism/latency:wake_seconds"]
    assert entry.limit == 5.0 and entry.overridden and "overridden" in entry.reason
    assert limits_digest(changed) != limits_digest(LIMITS)


@pytest.mark.parametrize(("spec", "message"), [
    ("nonsense", "not behaviour:name=value"),
    ("mechanism/latency:wake_seconds=fast", "is not a number"),
])
def test_malformed_overrides_are_refused(spec, message):
    with pytest.raises(ThresholdError, match=message):
        parse_overrides(spec)


def test_override_of_an_unknown_limit_is_refused():
    with pytest.raises(ThresholdError, match="unknown limit"):
        load_limits(CPU, {"mechanism/latency:teleport_seconds": 1.0})


def test_file_without_policy_or_with_bad_comparator_is_refused():
    with pytest.raises(ThresholdError, match="policy"):
        parse_limits("limits: {}\n")
    bad = "policy: {contract: x}\nlimits:\n  a/b:\n    c: {comparator: '~', limit: 1, unit: u, reason: r}\n"
    with pytest.raises(ThresholdError, match="unknown comparator"):
        parse_limits(bad)


def readings(**changes):
    base = dict(before=20 * GIB, after_level0=20 * GIB, after_level1=2 * GIB, after_level2=1 * GIB,
                after_wake=20 * GIB, managed=19 * GIB)
    return judges.DeviceReadings(**{**base, **changes})


def test_device_memory_passes_a_healthy_reading():
    assert judges.failures(judges.device_memory_per_level(readings(), LIMITS)) == []


def test_device_memory_at_the_limit_passes_and_just_below_fails():
    at = 20 * GIB - math.ceil(0.9 * 19 * GIB)  # frees 90 % of weights + KV, to the byte
    assert judges.failures(judges.device_memory_per_level(readings(after_level1=at), LIMITS)) == []
    below = judges.device_memory_per_level(readings(after_level1=at + (64 << 20)), LIMITS)
    assert any("freed_fraction_level1" in f for f in judges.failures(below))


def test_device_memory_catches_level0_release_and_a_short_wake():
    failures = judges.failures(judges.device_memory_per_level(
        readings(after_level0=18 * GIB, after_wake=17 * GIB), LIMITS))
    assert any("freed_bytes_level0" in f for f in failures)
    assert any("wake_return_fraction" in f for f in failures)


def test_residual_device_memory_drifting_across_cycles_fails():
    flat = [2 * GIB + (i % 2) * (8 << 20) for i in range(10)]  # noise, no trend
    leak = [2 * GIB + i * (256 << 20) for i in range(10)]  # +256 MiB a cycle
    assert judges.failures(judges.device_memory_stable(flat, LIMITS)) == []
    assert judges.failures(judges.device_memory_stable(leak, LIMITS))


def test_host_rss_slope_and_total():
    steady = [800 << 20] * 10
    leak = [(800 << 20) + i * (20 << 20) for i in range(10)]  # +2.5 % a cycle
    assert judges.failures(judges.host_rss_stable(steady, LIMITS)) == []
    failed = judges.failures(judges.host_rss_stable(leak, LIMITS))
    assert any("growth_per_cycle" in f for f in failed) and any("total_growth" in f for f in failed)


def test_latency_uses_the_median_and_labels_the_source():
    spiky = {"sleep": [0.1, 0.1, 5.0, 0.1, 0.1]}  # one outlier does not fail the median
    measured = judges.latency(spiky, LIMITS, "client")
    assert measured[0].ok and measured[0].name == "sleep_seconds [client]"
    assert not judges.latency({"wake": [3.0, 3.0, 3.0]}, LIMITS)[0].ok


@pytest.mark.parametrize(("delta", "ok"), [(0.0, True), (0.01, True), (0.02, False)])
def test_logprob_drift_at_below_and_above(delta, ok):
    golden = [-1.0, 0.0, -0.5]
    now = [-1.0, -delta, -0.5]
    (measurement,) = judges.logprob_drift(golden, now, LIMITS)
    assert measurement.ok == ok and measurement.observed == pytest.approx(delta)


def test_memory_freed_for_others():
    assert judges.failures(judges.freed_for_others(10 * GIB, 9 * GIB, LIMITS)) == []
    assert judges.failures(judges.freed_for_others(10 * GIB, 2 * GIB, LIMITS))
    assert judges.failures(judges.freed_for_others(0, 0, LIMITS))  # nothing freed at all


def _at_below_above(limit_key):
    value = LIMITS[limit_key].limit
    step = max(abs(value) * 1e-3, 1e-9)
    inside, outside = (value - step, value + step) if LIMITS[limit_key].comparator.startswith("<") \
        else (value + step, value - step)
    return value, inside, outside


@pytest.mark.parametrize("key", sorted(LIMITS))
def test_every_limit_holds_at_and_inside_and_fails_outside(key):
    value, inside, outside = _at_below_above(key)
    entry = LIMITS[key]
    assert entry.judge(value).ok, f"{key}: the limit itself must pass ({entry.comparator})"
    assert entry.judge(inside).ok
    assert not entry.judge(outside).ok
    assert "beyond" in entry.judge(outside).describe()
