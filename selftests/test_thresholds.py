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


W, KV, BEFORE = 10 * GIB, 100 * GIB, 120 * GIB  # weights, KV cache, device use awake


def staged(asleep=BEFORE - W - KV, weights_back=W, kv_back=KV):
    """A sleep that left `asleep` in use, then a weights wake and a kv_cache wake re-mapping
    the given bytes."""
    return judges.StagedWake(asleep, asleep + weights_back, asleep + weights_back + kv_back)


def readings(**changes):
    base = dict(before=BEFORE, level0_asleep=BEFORE, level1=staged(), level2=staged(),
                weights=W, kv_cache=KV)
    return judges.DeviceReadings(**{**base, **changes})


def failed(r):
    return judges.failures(judges.device_memory_per_level(r, LIMITS))


def test_device_memory_passes_a_healthy_reading():
    assert failed(readings()) == []


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(("part", "size"), [("weights", W), ("kv", KV)])
def test_each_part_released_at_the_limit_passes_and_just_below_fails(level, part, size):
    """Each of weights and KV cache against its own size, at and beyond 90 %."""
    key = f"{part}_released_fraction_level{level}"
    short = size - math.ceil(LIMITS[f"mechanism/device-memory-per-level:{key}"].limit * size)
    assert short > 0

    def with_short(missing):
        # The sleep kept `missing` bytes of that part, so its wake re-maps that much less.
        args = {"asleep": BEFORE - W - KV + missing,
                "weights_back": W - missing if part == "weights" else W,
                "kv_back": KV - missing if part == "kv" else KV}
        return readings(**{f"level{level}": staged(**args)})

    assert failed(with_short(short)) == []  # exactly at the limit
    assert failed(with_short(short // 2)) == []  # inside
    beyond = failed(with_short(short + (64 << 20)))
    assert any(key in f for f in beyond), beyond


def test_a_level1_sleep_that_keeps_the_weights_fails_though_kv_dominates():
    """Qwen3-0.6B on an H200: ~1.1 GiB weights, ~110 GiB KV. Keeping the weights frees 99 % of
    weights + KV, which the old single fraction passed; judged apart, the weights fail."""
    w, kv = int(1.1 * GIB), 110 * GIB
    before = w + kv + 3 * GIB
    kept = judges.StagedWake(asleep=before - kv, after_weights=before - kv, after_wake=before)
    healthy = judges.StagedWake(before - w - kv, before - kv, before)
    r = judges.DeviceReadings(before, before, kept, healthy, w, kv)
    assert (r.before - kept.asleep) / (w + kv) >= 0.9  # what the old judge looked at
    problems = judges.failures(judges.device_memory_per_level(r, LIMITS))
    assert len(problems) == 1 and problems[0].startswith(
        "mechanism/device-memory-per-level weights_released_fraction_level1: observed 0 ")


def test_a_wake_that_never_remaps_the_weights_fails_though_use_is_back_within_5_percent():
    w, kv = int(1.1 * GIB), 110 * GIB
    before = w + kv + 3 * GIB
    asleep = before - w - kv
    no_weights = judges.StagedWake(asleep, asleep, asleep + kv)  # weights wake re-maps nothing
    r = judges.DeviceReadings(before, before, no_weights, no_weights, w, kv)
    assert abs(no_weights.after_wake - before) / before <= 0.05  # what the old judge looked at
    problems = judges.failures(judges.device_memory_per_level(r, LIMITS))
    # The staged weights wake shows it, and so does the full wake measured in weights.
    assert sorted(p.split(":")[0] for p in problems) == [
        "mechanism/device-memory-per-level wake_return_of_weights [level 1]",
        "mechanism/device-memory-per-level wake_return_of_weights [level 2]",
        "mechanism/device-memory-per-level weights_released_fraction_level1",
        "mechanism/device-memory-per-level weights_released_fraction_level2"]


def test_device_memory_catches_level0_release_and_a_short_wake():
    short_wake = judges.StagedWake(BEFORE - W - KV, BEFORE - KV, BEFORE - 17 * GIB)
    problems = failed(readings(level0_asleep=BEFORE - GIB, level1=short_wake))
    assert any("freed_bytes_level0" in f for f in problems)
    assert any(f.startswith("mechanism/device-memory-per-level wake_return_fraction [level 1]")
               for f in problems)
    assert any("kv_released_fraction_level1" in f for f in problems)


@pytest.mark.parametrize(("regained", "ok"), [(0.9, True), (0.95, True), (0.89, False)])
def test_wake_regained_at_inside_and_beyond(regained, ok):
    """What the full wake brought back, against weights + KV cache (with a tolerance on the
    level the use returns to that lets a short return through, to isolate this limit)."""
    back = int(regained * (W + KV))
    asleep = BEFORE - back
    w = judges.StagedWake(asleep, asleep + W, BEFORE)
    measured = judges.device_memory_per_level(readings(level1=w, weights=W, kv_cache=KV), LIMITS)
    regained_m = next(m for m in measured if m.name == "wake_regained_fraction [level 1]")
    assert regained_m.ok == ok, regained_m.describe()


def test_device_readings_without_sizes_are_a_reading_error():
    with pytest.raises(judges.ReadingError, match="device readings without sizes"):
        judges.device_memory_per_level(readings(weights=0), LIMITS)


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


def test_host_rss_without_a_reading_is_an_error_not_zero_growth():
    with pytest.raises(judges.ReadingError, match="host RSS series unusable"):
        judges.host_rss_stable([0] * 10, LIMITS)
    with pytest.raises(judges.ReadingError):
        judges.host_rss_stable([800 << 20, 0, 800 << 20], LIMITS)
    with pytest.raises(judges.ReadingError):
        judges.host_rss_stable([800 << 20], LIMITS)


def _syncs(n: int = 30, rss=lambda i: 3 << 30, threads=lambda i: 75, fds=lambda i: 172,
           seconds=lambda i: 0.06) -> list[judges.SyncReading]:
    return [judges.SyncReading(rss(i), threads(i), fds(i), seconds(i)) for i in range(n)]


def test_many_syncs_flat_series_pass_and_each_leak_fails_its_own_measurement():
    assert judges.failures(judges.many_syncs_stable(_syncs(), LIMITS)) == []
    # pools that fill early and then stay are not a slope of a thread per sync
    early = _syncs(threads=lambda i: 75 + min(i, 3), fds=lambda i: 172 + min(i, 2))
    assert judges.failures(judges.many_syncs_stable(early, LIMITS)) == []
    for series, name in ((_syncs(threads=lambda i: 75 + i), "threads_per_sync"),
                         (_syncs(fds=lambda i: 172 + 2 * i), "open_fds_per_sync"),
                         (_syncs(rss=lambda i: (3 << 30) + (64 << 20) * i), "rss_growth_per_sync"),
                         (_syncs(seconds=lambda i: 0.06 * (1 + i / 5)), "sync_time_ratio")):
        failed = judges.failures(judges.many_syncs_stable(series, LIMITS))
        assert len(failed) == 1 and name in failed[0], (name, failed)


def test_many_syncs_too_few_is_beyond_the_syncs_limit_and_unreadable_is_an_error():
    failed = judges.failures(judges.many_syncs_stable(_syncs(n=9), LIMITS))
    assert len(failed) == 1 and "syncs" in failed[0]
    with pytest.raises(judges.ReadingError, match="sync series unusable"):
        judges.many_syncs_stable(_syncs(n=2), LIMITS)
    with pytest.raises(judges.ReadingError):
        judges.many_syncs_stable(_syncs(threads=lambda i: 0), LIMITS)


METRIC = "vllm:sleep_mode_operation_duration_seconds"


def test_histogram_seconds_reads_the_sum_delta_and_absent_before_as_zero():
    assert judges.histogram_seconds(None, (1.0, 0.25), METRIC, "sleep") == 0.25
    assert judges.histogram_seconds((3.0, 1.0), (4.0, 1.5), METRIC, "wake") == 0.5


def test_a_missing_latency_histogram_fails_instead_of_reading_0_s():
    with pytest.raises(AssertionError, match=r"^mechanism/latency: the engine exposes no "
                       r"vllm:sleep_mode_operation_duration_seconds series for operation='sleep'"):
        judges.histogram_seconds(None, None, METRIC, "sleep")


def test_a_latency_histogram_that_did_not_count_the_call_fails():
    with pytest.raises(AssertionError, match=r"count moved by 0 over 1 call\(s\); expected 1"):
        judges.histogram_seconds((2.0, 0.5), (2.0, 0.5), METRIC, "wake")


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


def test_memory_freed_for_others_needs_the_kv_cache_freed():
    """A sleep that frees a few MiB of noise, all of which another process gets, judged nothing:
    with the KV cache's size known, what was freed is held to it first."""
    noise = judges.freed_for_others(4 << 20, 4 << 20, LIMITS, kv_cache=GIB)
    assert [m.name for m in noise if not m.ok] == ["kv_released_fraction"]
    nothing = judges.freed_for_others(-(1 << 20), None, LIMITS, kv_cache=GIB)  # no allocation tried
    assert [(m.name, m.observed, m.ok) for m in nothing] == [("kv_released_fraction", 0.0, False)]
    assert judges.failures(judges.freed_for_others(GIB, GIB, LIMITS, kv_cache=GIB)) == []


def test_device_memory_without_a_weights_size_judges_the_kv_cache_alone():
    """Host RSS on CPU cannot resolve a tiny model's weights: weights None leaves out every
    weights-based measurement and still fails a sleep that kept the KV cache."""
    kept = judges.StagedWake(BEFORE, BEFORE, BEFORE)  # nothing released, nothing re-mapped
    r = readings(level1=kept, level2=kept, weights=None)
    names = {m.name for m in judges.device_memory_per_level(r, LIMITS)}
    assert not any("weights" in n for n in names), names
    assert failed(r) == [
        m.describe() for m in judges.device_memory_per_level(r, LIMITS) if not m.ok]
    assert {m.name for m in judges.device_memory_per_level(r, LIMITS) if not m.ok} == {
        "kv_released_fraction_level1", "kv_released_fraction_level2",
        "wake_regained_fraction [level 1]", "wake_regained_fraction [level 2]"}
    assert failed(readings(weights=None)) == []


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
