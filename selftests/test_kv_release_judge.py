"""The judge of golden/after-kv-release (fixtures/judging/golden.py) on hand-made records of
both transports: it passes the engine that keeps the rule and fails, with its message, each way
of breaking it."""

from __future__ import annotations

from typing import Any

import pytest

from fixtures.judging.assertions import held_problems
from fixtures.judging.golden import KvRelease, kv_release_problems
from fixtures.observing.client import Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE
from fixtures.observing.offline import Called
from fixtures.protocol.generation import Hold, HoldSample, Outcome
from fixtures.protocol.parts import Answer, State

REF = [5, 6, 7, 8]
PAUSE = "pause(mode='keep')"
ASLEEP = {"is_sleeping": True, "is_paused": True}
AWAKE = {"is_sleeping": False, "is_paused": False}
QUIET = Hold({None: [HoldSample(3.0, False, 0, 0.0, 0)]}, 3.0, "a 3 s window", {None: "held"})
CPU_RAISED = ("Worker failed with error 'Selective discard is not supported on CPU.', please check "
              "the stack trace above for the root cause")


def ended(ids: list[int], reason: str | None = "length", finals: int = 1) -> Outcome:
    return Outcome(finals > 0, ids, len(ids), reason, None, finals, f"{len(ids)} ids, {reason}")


def called(call: str, method: str, value: Any = None, raised: str | None = None, **args: Any) -> Answer:
    error = {"type": "RuntimeError", "message": raised} if raised else None
    return Answer(call, args, Called(method, value, error))


def replied(call: str, status: int, body: Any, **args: Any) -> Answer:
    return Answer(call, args, Reply("POST", f"/{call}", status, body, 0.01))


def offline(platform: str = "cuda", **changes: Any) -> KvRelease:
    """Through the Python API: flags only, outputs as delivered."""
    obs = KvRelease(platform, PAUSE, called("pause", "pause_generation", mode="keep"), REF,
                    released=called("release_kv", "release_kv_cache_memory"),
                    state_released=State(ASLEEP, None, False), hold=QUIET,
                    woke=called("wake_up", "wake_up", True, tags=["kv_cache"]),
                    state_woken=State(AWAKE, None, False),
                    held=ended(REF), fresh=ended(REF))
    for key, value in changes.items():
        setattr(obs, key, value)
    return obs


def http(platform: str = "cuda", **changes: Any) -> KvRelease:
    """Over HTTP: reply bodies, flags and the gauge."""
    cpu = platform == "cpu"
    release = (replied("release_kv", 500, {"error": {"message": "Call to release_kv_cache_memory method "
                                                     "failed: Selective discard is not supported on CPU."}})
               if cpu else replied("release_kv", 200, {"status": "kv_cache_released"}))
    obs = KvRelease(platform, PAUSE, replied("pause", 200, {"status": "paused"}, mode="keep"), REF,
                    released=release,
                    state_released=State(ASLEEP, AWAKE_GAUGE if cpu else SLEEP_GAUGE[0], True),
                    hold=QUIET,
                    woke=replied("wake_up", 200, {"status": "awake", "tags": ["kv_cache"]},
                                 tags=["kv_cache"]),
                    state_woken=State(AWAKE, AWAKE_GAUGE, True),
                    held=ended(REF), fresh=ended(REF))
    for key, value in changes.items():
        setattr(obs, key, value)
    return obs


@pytest.mark.parametrize("platform", ["cuda", "cpu"])
def test_kv_release_passes_released_or_refused_on_cpu_then_woken_with_the_same_output(platform):
    assert kv_release_problems(http(platform)) == []
    refused = called("release_kv", "release_kv_cache_memory", raised=CPU_RAISED)
    changes = {"released": refused} if platform == "cpu" else {}
    assert kv_release_problems(offline(platform, **changes)) == []


def test_kv_release_is_refused_for_want_of_selective_discard_on_cpu_only():
    refused = called("release_kv", "release_kv_cache_memory", raised=CPU_RAISED)
    assert kv_release_problems(offline("cuda", released=refused)) == [
        f"{refused.raw.describe()} after {PAUSE}; expected it to return"]
    other = called("release_kv", "release_kv_cache_memory",
                   raised="release_kv_cache_memory() requires a completed pause first")
    # The known finding on LLM-MP0 (conformance/findings.yaml) matches this message.
    level0 = offline("cpu", released=other, pause="sleep(level=0)")
    assert kv_release_problems(level0) == [
        f"{other.raw.describe()} after sleep(level=0); expected it to return (or, on CPU, to raise "
        "'Selective discard is not supported on CPU')"]
    boom = replied("release_kv", 500, {"error": {"message": "boom"}})
    problems = kv_release_problems(http("cpu", released=boom))
    assert problems[0] == (f"{boom.raw.describe()} after {PAUSE}; expected 200 {{'status': "
                           "'kv_cache_released'} (or, on CPU, a refusal naming 'Selective discard is "
                           "not supported')")
    # Refused where the platform has selective discard: not released, and the gauge says so too.
    cpu_refusal = http("cpu").released
    assert kv_release_problems(http("cuda", released=cpu_refusal))[0].startswith(
        f"{cpu_refusal.raw.describe()} after {PAUSE}; expected 200")


def test_kv_release_judges_the_gauge_where_the_transport_reads_it():
    problems = kv_release_problems(http("cuda", state_released=State(ASLEEP, AWAKE_GAUGE, True)))
    assert problems == [f"after {PAUSE} and the release: expected is_sleeping=True is_paused=True "
                        f"gauge={SLEEP_GAUGE[0]}; observed is_sleeping=True is_paused=True "
                        f"gauge={AWAKE_GAUGE}"]


def test_kv_release_fails_when_a_request_runs_on_released_memory():
    ran = Hold({None: [HoldSample(1.0, False, 1, None, 2)]}, 3.0, "a 3 s window", {None: "2 tokens"})
    expected = held_problems(ran, "a request submitted after the release, before the kv_cache wake")
    assert expected and "2 token" in expected[0]
    for obs in (offline(hold=ran), http(hold=ran)):
        assert kv_release_problems(obs) == expected


def test_kv_release_fails_on_flags_wake_and_output():
    problems = kv_release_problems(offline(
        state_released=State({"is_sleeping": False, "is_paused": True}, None, False),
        woke=called("wake_up", "wake_up", False, tags=["kv_cache"]),
        state_woken=State(ASLEEP, None, False),
        held=ended([], None, 0), fresh=None))
    assert problems == [
        f"after {PAUSE} and the release: expected is_sleeping, is_paused True; observed "
        "{'is_sleeping': False, 'is_paused': True}",
        "wake_up() returned False (0.00 s); expected True",
        "after wake_up(tags=['kv_cache']): expected is_sleeping, is_paused False; observed "
        "{'is_sleeping': True, 'is_paused': True}",
        "the request held over the release: finish reasons [None], expected all 'length'",
        "the request held over the release: 0 completion tokens, expected 4",
        "the request held over the release: token ids differ from the uninterrupted run from "
        "position 0 (0 vs 4 ids)",
        "the request held over the release: observed 0 ids, None",
        "no fresh request was run after the wake (the engine was not awake)"]
    drift = kv_release_problems(offline(fresh=ended([5, 6, 7, 9])))
    assert drift == ["a fresh request after the wake: token ids differ from the uninterrupted run "
                     "from position 3 (4 vs 4 ids)", "a fresh request after the wake: observed 4 ids, length"]
    cut = kv_release_problems(http(held=ended(REF[:2], "abort")))
    assert cut[0] == "the request held over the release: finish reasons ['abort'], expected all 'length'"
    twice = kv_release_problems(http(held=ended(REF, finals=2)))
    assert twice[0] == "the request held over the release: 2 outputs are marked finished; exactly one must be"


@pytest.mark.parametrize("label", ["sleep(level=0)", PAUSE])
def test_kv_release_without_the_pause_reports_the_pause(label):
    missing = called("pause", "pause_generation",
                     raised="'LLM' object has no attribute 'pause_generation'", mode="keep")
    obs = KvRelease("cpu", label, missing, REF)
    assert kv_release_problems(obs) == [
        f"{missing.raw.describe()}; expected {label} to complete (the release needs it)"]
