"""The HTTP behaviours added for upstream's lifecycle checks (issue 13), on hand-made records.

Each judge lives beside its test (conformance/<aspect>/test_*.py, loaded here by path): it must
pass what the engine should do and catch each way it can break. The state-only tests run whole
against a scripted engine that breaks one rule.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from fixtures.axes.topologies import SINGLE
from fixtures.judging import judges
from fixtures.observing.client import Generation, Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE

ROOT = Path(__file__).resolve().parent.parent / "conformance"


def load(relative: str) -> ModuleType:
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(f"new_behaviour_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reply(status: int, body: Any, path: str = "/release_kv_cache_memory") -> Reply:
    return Reply("POST", path, status, body, 0.01)


def gen(reasons: list[str | None], tokens: int | None, ids: tuple[int, ...] = ()) -> Generation:
    record = Generation(stream=True)
    record.finish_reasons = dict(enumerate(reasons))
    record.completion_tokens = tokens
    record.token_ids = list(ids)
    return record


# -- misuse/release-kv-out-of-order ---------------------------------------------------------

def test_release_refusal_names_the_missing_precondition():
    judge = judges.release_refusal_problems
    refused = reply(500, {"error": {"message": "Call to release_kv_cache_memory method failed: "
                                    "release_kv_cache_memory() requires a completed pause first",
                                    "type": "InternalServerError", "param": None, "code": 500}})
    # A 500 that names the precondition is refused, but blamed on the server (issue 22, hole 9):
    # a failure message of its own, which a finding can record.
    blamed = judge(refused, "completed pause")
    assert blamed and blamed[0].startswith("refused with 500 (a server error) naming 'completed pause'")
    assert judge(reply(400, {"error": "requires all executor memory to be resident"}), "resident") == []
    accepted = judge(reply(200, {"status": "kv_cache_released"}), "completed pause")
    assert accepted and accepted[0].startswith("expected a refusal naming 'completed pause'")
    # An engine without the precondition check fails later, in the discard, for another reason.
    wrong = judge(reply(500, {"error": {"message": "Selective discard is not supported on CPU."}}),
                  "completed pause")
    assert wrong and wrong[0].startswith("answered 500 (a server error) without naming 'completed pause'")


# -- custody/abort-held-request ---------------------------------------------------------------

def test_aborted_held_request_must_end_unrun():
    held = load("custody/test_abort_held_request.py")
    assert held.held_abort_problems(gen(["abort"], 0)) == []
    ran = held.held_abort_problems(gen(["length"], 48, tuple(range(48))))
    assert any(p.startswith("the aborted request ended with 'length', expected 'abort'") for p in ran)
    assert any(p.startswith("the aborted request has tokens (48 ids") for p in ran)
    partial = held.held_abort_problems(gen(["abort"], 5, (1, 2, 3, 4, 5)))
    assert partial and partial[0].startswith("the aborted request has tokens (5 ids")


def test_aborted_held_request_must_not_run_after_resume():
    held = load("custody/test_abort_held_request.py")
    assert held.after_resume_problems(48.0, 0, 48) == []
    both = held.after_resume_problems(96.0, 0, 48)
    assert both and both[0].startswith("96 tokens generated after /resume, expected at most 48")
    stuck = held.after_resume_problems(48.0, 1, 48)
    assert stuck == ["/load is 1 after both requests ended, expected 0"]


# -- metrics/sleep-ops-counted ----------------------------------------------------------------

def exposition(sleep: int | None, wake: int, in_flight: float = 0.0, release: int | None = None,
               total: bool = False) -> str:
    name = "vllm:sleep_mode_operation_duration_seconds"
    lines = [f"# TYPE {name} histogram", "# TYPE vllm:sleep_mode_operations_in_flight gauge"]
    for op, count in (("sleep", sleep), ("wake", wake), ("release_kv_cache_memory", release)):
        if count is None:
            continue
        lines += [f'{name}_bucket{{operation="{op}",le="+Inf"}} {count}',
                  f'{name}_count{{operation="{op}"}} {count}', f'{name}_sum{{operation="{op}"}} 0.1',
                  f'vllm:sleep_mode_operations_in_flight{{operation="{op}"}} {in_flight}']
    if total:
        lines += ["# TYPE vllm:sleep_mode_operations counter", "vllm:sleep_mode_operations_total 3"]
    return "\n".join(lines) + "\n"


def test_refused_sleep_records_nothing_and_accepted_calls_one_each():
    ops = load("metrics/test_sleep_ops.py")
    none = ops.NOTHING
    # A server that has never slept has no sleep series: nothing counted, nothing in flight.
    assert ops.count_problems(exposition(None, 1), exposition(None, 1), none, "refused") == []
    counted = ops.count_problems(exposition(None, 1), exposition(1, 1), none,
                                 "after the refused /sleep?level=3")
    assert counted and counted[0].startswith(
        "after the refused /sleep?level=3: expected observation deltas {'sleep': 0.0, 'wake': 0.0, "
        "'release_kv_cache_memory': 0.0}; observed {'sleep': 1.0, 'wake': 0.0, "
        "'release_kv_cache_memory': 0.0}")
    cycle = {**none, "sleep": 1.0, "wake": 2.0}
    assert ops.count_problems(exposition(None, 1), exposition(1, 3), cycle, "cycle") == []
    assert ops.count_problems(exposition(1, 1), exposition(2, 2), cycle, "cycle")  # a wake not counted
    stuck = ops.count_problems(exposition(1, 1), exposition(2, 3, in_flight=1.0), cycle, "cycle")
    assert stuck and stuck[0].startswith("cycle: expected no operation in flight after the calls answered")
    released = {**none, "release_kv_cache_memory": 1.0}
    assert ops.count_problems(exposition(1, 3), exposition(1, 3, release=1), released, "release") == []
    assert ops.count_problems(exposition(1, 3), exposition(1, 3), released, "release")  # release not counted
    totals = ops.count_problems(exposition(1, 3), exposition(1, 3, total=True), none, "totals")
    assert totals == ["totals: /metrics exports ['vllm:sleep_mode_operations_total'], "
                      "expected no sleep_mode_operations_total series"]
    route = ("/sleep", "POST", "4xx")
    requests = 'http_requests_total{handler="/sleep",method="POST",status="4xx"} 1.0\n'
    with_requests = exposition(1, 3) + "# TYPE http_requests counter\n" + requests
    assert ops.count_problems(exposition(1, 3), with_requests, none, "http", {route: 1.0}) == []
    assert ops.count_problems(exposition(1, 3), exposition(1, 3), none, "http", {route: 1.0}) == [
        "http: expected http_requests_total deltas (handler, method, status) "
        "{('/sleep', 'POST', '4xx'): 1.0}; observed {('/sleep', 'POST', '4xx'): 0.0}"]


# -- whole tests against a scripted engine ------------------------------------------------------

class ScriptedControl:
    """The control plane of a 0.32-like engine (flags and gauge only), with one bug switchable."""

    def __init__(self, bug: str = "") -> None:
        self.bug = bug
        self.paused = False
        self.tags: set[str] = set()
        self.gauge = AWAKE_GAUGE
        self.stale_cache = False

    def pause(self, mode: str | None = None, clear_cache: bool | None = None) -> Reply:
        if mode not in (None, "abort", "wait", "keep"):
            if self.bug == "invalid-mode-resumes":
                self.paused = False
            return reply(400, {"error": {"param": "query.mode", "code": 400}}, "/pause")
        if self.paused and self.bug == "double-pause-500":
            return reply(500, {"error": "Failed to pause generation"}, "/pause")
        self.paused = True
        self.stale_cache = self.stale_cache or (self.bug == "kept-cache-stale" and clear_cache is False)
        return reply(200, {"status": "paused"}, "/pause")

    def resume(self) -> Reply:
        self.paused = False
        return reply(200, {"status": "resumed"}, "/resume")

    def sleep(self, level: int = 1, mode: str | None = None) -> Reply:
        self.paused = True
        if level >= 1 and "weights" not in self.tags:
            self.tags = {"weights", "kv_cache"}
        if self.bug != "gauge-not-updated":
            self.gauge = SLEEP_GAUGE[level]
        return reply(200, {"status": "sleeping", "level": level}, "/sleep")

    def wake_up(self, tags: list[str] | None = None) -> Reply:
        self.tags = set() if tags is None else self.tags - set(tags)
        awake = not self.tags
        if awake:
            self.paused = False
            self.gauge = AWAKE_GAUGE
        return reply(200, {"status": "awake" if awake else "sleeping", "tags": tags}, "/wake_up")

    def flags(self) -> tuple[bool, bool]:
        return self.paused or bool(self.tags), self.paused

    def sleep_state(self) -> tuple[float, float, float]:
        return self.gauge

    def health(self) -> int:
        return 200


class ScriptedEngine:
    profile = "0.32"
    platform = "cpu"

    def __init__(self, bug: str = "") -> None:
        self.control = ScriptedControl(bug)

    def complete(self, prompt: str, max_tokens: int = 16, **_: Any) -> Generation:
        # A kept prefix cache that serves stale blocks shifts the greedy ids from then on.
        shift = 1 if self.control.stale_cache else 0
        return gen(["length"], max_tokens, tuple(i + shift for i in range(max_tokens)))


def test_pause_while_paused_passes_and_catches_a_refused_repeat():
    paused = load("misuse/test_pause_while_paused.py")
    paused.test_pause_while_paused(ScriptedEngine(), SINGLE, "keep")
    with pytest.raises(AssertionError,
                       match=r"^expected 200 \{'status': 'paused'\}; observed POST /pause -> 500"):
        paused.test_pause_while_paused(ScriptedEngine("double-pause-500"), SINGLE, "keep")


def test_invalid_mode_while_paused_passes_and_catches_an_unpause():
    paused = load("misuse/test_pause_while_paused.py")
    paused.test_invalid_mode_while_paused(ScriptedEngine(), SINGLE, "abort")
    with pytest.raises(AssertionError, match=r"^after the refused /pause\?mode=invalid while paused "
                                             r"\(abort\): expected is_sleeping=True is_paused=True"):
        paused.test_invalid_mode_while_paused(ScriptedEngine("invalid-mode-resumes"), SINGLE, "abort")


def test_resleep_after_partial_wake_passes_and_catches_a_stale_gauge():
    resleep = load("flags/test_resleep_after_partial_wake.py")
    for second in (0, 1, 2):
        resleep.test_resleep_after_partial_wake(ScriptedEngine(), second)
    with pytest.raises(AssertionError, match=r"^after /sleep\?level=1: expected is_sleeping=True "
                                             r"is_paused=True gauge=\(0\.0, 1\.0, 0\.0\)"):
        resleep.test_resleep_after_partial_wake(ScriptedEngine("gauge-not-updated"), 2)


def test_pause_clear_cache_passes_and_catches_changed_output():
    golden = load("golden/test_pause_clear_cache.py")
    for clear in (True, False):
        golden.test_pause_clear_cache(ScriptedEngine(), clear)
    golden.test_pause_clear_cache(ScriptedEngine("kept-cache-stale"), True)  # the cleared path is fine
    with pytest.raises(AssertionError, match=r"^/pause\?clear_cache=false then /resume: first run: token ids "
                                             r"differ from the uninterrupted run from position 0"):
        golden.test_pause_clear_cache(ScriptedEngine("kept-cache-stale"), False)
