"""The judges of custody/async-late-arrival and misuse/release-kv-needs-pause on hand-made
observations: each passes the engine that keeps the rule and fails, with its message, each way
of breaking it."""

from __future__ import annotations

from typing import Any

from fixtures.judging.offline_judges import (
    LateArrival,
    UnpausedRelease,
    late_arrival_problems,
    unpaused_release_problems,
)
from fixtures.observing.offline import Called

REF = [5, 6, 7, 8]
PAUSED_ERROR = "RetryableRequestError: Generation is paused. Please retry after it resumes."


def out(ids: list[int], finished: bool = False, reason: str | None = None,
        phase: str = "resumed") -> dict[str, Any]:
    return {"phase": phase, "token_ids": ids, "finished": finished,
            "finish_reason": reason if reason or not finished else "length", "logprobs": None}


def deltas(ids: list[int], phase: str = "resumed") -> list[dict[str, Any]]:
    return [out(ids[:2], phase=phase), out(ids[2:], True, phase=phase)]


def ok(method: str, value: Any = None) -> Called:
    return Called(method, value)


def raised(method: str, kind: str, message: str) -> Called:
    return Called(method, raised={"type": kind, "message": message})


# -- custody/async-late-arrival ---------------------------------------------------------------

def late(fate: str, **changes: Any) -> LateArrival:
    base: dict[str, Any] = dict(
        mode="abort", fate=fate, paused=ok("pause_generation"), window_s=3.0,
        seconds_to_answer=None, progress_paused=0, outputs_paused=[], error_paused=None,
        resumed=ok("resume_generation"), outputs=deltas(REF), reference=REF)
    if fate == "rejected":
        base |= dict(window_s=5.0, seconds_to_answer=0.05, error_paused=PAUSED_ERROR, outputs=[],
                     error=PAUSED_ERROR, retry_outputs=deltas(REF))
    base |= changes
    return LateArrival(**base)


def test_held_late_arrival_passes_when_silent_then_complete():
    assert late_arrival_problems(late("held")) == []


def test_held_late_arrival_fails_when_aborted_while_paused():
    # What the late-arrival-dropped fault does: the request ends with "abort" during the pause.
    aborted = [out([], True, "abort", phase="paused")]
    problems = late_arrival_problems(late("held", seconds_to_answer=0.1, outputs_paused=aborted,
                                          outputs=aborted))
    assert problems[0].startswith("the request submitted during pause_generation(mode='abort') was "
                                  "not held while paused: 0 tokens processed, 1 outputs, 0 ids, last "
                                  "finished=True reason='abort'")
    assert any(p.startswith("the held request after the resume: finish reason 'abort'") for p in problems)


def test_held_late_arrival_fails_when_it_runs_while_paused():
    problems = late_arrival_problems(late("held", progress_paused=3))
    assert problems == ["the request submitted during pause_generation(mode='abort') was not held while "
                        "paused: 3 tokens processed, no output delivered within 3.0 s; expected it held "
                        "until resume_generation()"]


def test_held_late_arrival_fails_when_refused_or_cut_short():
    refused = late_arrival_problems(late("held", mode="keep", error_paused=PAUSED_ERROR))
    assert refused == [f"the request submitted during pause_generation(mode='keep') raised {PAUSED_ERROR} "
                       "while paused; expected it held until resume_generation()"]
    short = late_arrival_problems(late("held", outputs=deltas(REF[:3])))
    assert short and short[0].startswith("the held request after the resume: concatenated deltas: 3 ids, "
                                         "expected 4")


def test_rejected_late_arrival_passes_with_the_retryable_error_and_a_served_retry():
    assert late_arrival_problems(late("rejected")) == []


def test_rejected_late_arrival_fails_when_held_instead():
    # Stock 0.32 judged under the 0.33 profile.
    problems = late_arrival_problems(late("rejected", seconds_to_answer=None, error_paused=None,
                                          outputs=deltas(REF), error=None, retry_outputs=None))
    assert problems == ["pause_generation(mode='abort'): no rejection within 5.0 s; the request was "
                        "held instead (0 tokens processed, no output); expected RetryableRequestError "
                        "'Generation is paused…'"]


def test_rejected_late_arrival_fails_on_another_error_or_a_lost_retry():
    other = late_arrival_problems(late("rejected", error_paused="EngineDeadError: gone"))
    assert other == ["pause_generation(mode='abort'): the request raised EngineDeadError: gone; "
                     "expected RetryableRequestError 'Generation is paused…'"]
    lost = late_arrival_problems(late("rejected", retry_outputs=[], retry_error=PAUSED_ERROR))
    assert lost == [f"the same request after the resume raised {PAUSED_ERROR}",
                    "the same request after the resume: nothing was delivered"]


def test_a_failed_pause_is_the_only_problem_reported():
    problems = late_arrival_problems(late("held", paused=raised("pause_generation", "ValueError", "no")))
    assert problems == ["pause_generation() raised ValueError: no (0.00 s); expected "
                        "pause_generation(mode='abort') to return"]


# -- misuse/release-kv-needs-pause ------------------------------------------------------------

REFUSAL = raised("release_kv_cache_memory", "RuntimeError",
                 "release_kv_cache_memory() requires a completed pause first")
AWAKE = {"is_sleeping": False, "is_paused": False}


def test_unpaused_release_passes_when_refused_and_nothing_changed():
    obs = UnpausedRelease(REFUSAL, AWAKE, [out(REF, True)], None, REF)
    assert unpaused_release_problems(obs) == []


def test_unpaused_release_fails_when_it_is_performed():
    obs = UnpausedRelease(ok("release_kv_cache_memory"), {"is_sleeping": True, "is_paused": False},
                          None, None, REF)
    assert unpaused_release_problems(obs) == [
        "release_kv_cache_memory() returned None (0.00 s) without a completed pause; expected it to "
        "raise 'requires a completed pause'",
        "after release_kv_cache_memory() on an unpaused engine: expected is_sleeping, is_paused False; "
        "observed {'is_sleeping': True, 'is_paused': False}",
        "no request was run after the refused release (the engine was not awake)"]


def test_unpaused_release_fails_on_the_wrong_refusal_or_changed_output():
    wrong = raised("release_kv_cache_memory", "RuntimeError", "Selective discard is not supported on CPU.")
    obs = UnpausedRelease(wrong, AWAKE, [out([5, 6, 0, 0], True)], None, REF)
    problems = unpaused_release_problems(obs)
    assert problems[0] == ("release_kv_cache_memory() raised RuntimeError: Selective discard is not "
                           "supported on CPU. (0.00 s); expected the refusal to say 'requires a "
                           "completed pause'")
    assert problems[1].startswith("a request after the refused release: final output: 4 ids, expected 4; "
                                  "first difference at position 2")
