"""Issue 13 holes 2-6, on hand-made records: each new judgement fails where the old check passed,
and passes what a conforming engine does."""

from __future__ import annotations

import re

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging.offline_judges import inproc_wait_problems
from fixtures.observing.client import Generation, Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView
from fixtures.observing.offline import Called, Delivery

TOKENS = 16


def gen(reasons=(), ids=(), done=True, error=None, usage=None, stream=True) -> Generation:
    g = Generation(stream=stream)
    g.finish_reasons = dict(enumerate(reasons))
    g.token_ids = list(ids)
    g.chunks = [(1.0 + i, "x") for i in range(len(g.token_ids))] if stream else []
    g.completion_tokens = usage
    g.error = error
    g.started, g.ended = 1.0, (1.2 if done else None)
    if done:
        g.done.set()
    return g


def reply(status: int, body: object = None) -> Reply:
    return Reply("POST", "/resume", status, body, 0.01)


ASLEEP = StateView(True, True, SLEEP_GAUGE[1])


# -- hole 2: safety/no-request-while-asleep -------------------------------------------------
def test_a_5xx_on_resume_is_not_a_refusal():
    # Old: `if resumed.status >= 400: return` -- a crash on /resume passed.
    problems = judges.resume_refusal_problems(reply(500, "Internal Server Error"), ASLEEP, ASLEEP, 200)
    assert problems and problems[0].startswith("/resume while asleep answered 500: a server error")


def test_a_clean_4xx_refusal_passes_and_a_leaky_one_fails():
    refused = reply(400, {"error": "asleep"})
    assert judges.resume_refusal_problems(refused, ASLEEP, ASLEEP, 200) == []
    unpaused = judges.resume_refusal_problems(refused, ASLEEP, StateView(True, False, SLEEP_GAUGE[1]), 200)
    assert unpaused[0] == "after /resume was refused: is_paused false: the refusal unpaused the scheduler"
    woke = judges.resume_refusal_problems(refused, ASLEEP, StateView(False, True, AWAKE_GAUGE), 200)
    assert any("is_sleeping false" in p for p in woke) and any("gauge moved" in p for p in woke)
    assert judges.resume_refusal_problems(refused, ASLEEP, ASLEEP, 503)[0].startswith(
        "after /resume was refused: /health answered 503")


def test_a_request_that_ran_while_asleep_says_so():
    # Stock 0.32: the request completes at once; the old message said it was "never accepted".
    met = StateView(True, False, SLEEP_GAUGE[1])
    resumed = reply(200, {"status": "resumed"})
    ran = judges.asleep_hold_problems(gen(["length"], range(TOKENS)), 1, 0, 200, resumed, met)
    assert len(ran) == 1
    # The finding's signature in conformance/findings.yaml matches this message whole.
    assert re.match(r"a request ran while asleep: after /sleep\?level=1 /resume answered 200 "
                    r"\{'status': 'resumed'\}, and the request sent next completed \(finish_reason "
                    r"'length', 16 tokens\) \d+\.\d\d s after it was sent with memory tags still "
                    r"asleep \(is_sleeping=True is_paused=False", ran[0])
    assert "never accepted" not in ran[0]
    partial = judges.asleep_hold_problems(gen([None], range(3), done=False), 1, 1, 200, reply(200), met)
    assert partial[0].startswith(f"{judges.RAN_WHILE_ASLEEP}: after /sleep?level=1 /resume answered 200")
    assert "the request sent next received 3 tokens" in partial[0]


def test_a_held_request_passes_and_other_outcomes_differ():
    met = StateView(True, False, SLEEP_GAUGE[1])
    ok = reply(200, {"status": "resumed"})
    assert judges.asleep_hold_problems(gen(done=False), 1, 1, 200, ok, met) == []
    never = judges.asleep_hold_problems(gen(done=False), 1, 0, 200, ok, met)
    assert never[0].startswith("request sent while asleep was never accepted (/load stayed 0)")
    failed = judges.asleep_hold_problems(gen(error=RuntimeError("boom")), 1, 1, 200, ok, met)
    assert failed[0].startswith("request sent while asleep failed with RuntimeError")
    empty = judges.asleep_hold_problems(gen(["abort"]), 1, 1, 200, ok, met)
    assert empty[0].startswith("request sent while asleep was answered without a token")
    assert judges.asleep_hold_problems(gen(done=False), 1, 1, 500, ok, met)[0].startswith(
        "/health answered 500")


# -- hole 3: custody/drain-before-offload, the gauge during the drain -------------------------
def readings(*points: tuple[float, tuple[float, float, float] | None]) -> list[judges.GaugeReading]:
    return [judges.GaugeReading(t - 0.01, t, g) for t, g in points]


def test_an_early_gauge_flip_fails():
    # Old: read once after /sleep returned, when both requests were done -- never failed.
    series = readings((10.1, AWAKE_GAUGE), (10.2, SLEEP_GAUGE[1]), (13.0, SLEEP_GAUGE[1]),
                      (15.2, SLEEP_GAUGE[1]))
    problems = judges.drain_gauge_problems(series, 15.0, AWAKE_GAUGE)
    assert len(problems) == 1
    assert problems[0].startswith(f"sleep-state gauge not awake during the drain: read {SLEEP_GAUGE[1]} "
                                  f"4.80 s before the in-flight requests finished (2 of 3 readings")
    missing = judges.drain_gauge_problems(readings((10.1, None)), 15.0, AWAKE_GAUGE)
    assert missing[0].startswith("sleep-state gauge not awake during the drain: read None")
    unfinished = judges.drain_gauge_problems(readings((10.1, SLEEP_GAUGE[2])), None, AWAKE_GAUGE)
    assert "while an in-flight request never finished" in unfinished[0]


def test_a_gauge_that_flips_after_the_drain_passes():
    series = readings((10.1, AWAKE_GAUGE), (12.0, AWAKE_GAUGE), (14.9, AWAKE_GAUGE),
                      (15.1, SLEEP_GAUGE[1]))
    assert judges.drain_gauge_problems(series, 15.0, AWAKE_GAUGE) == []
    # Within the grace before the client saw the end: the engine may already have finished.
    near = readings((10.1, AWAKE_GAUGE), (14.9, SLEEP_GAUGE[1]))
    assert judges.drain_gauge_problems(near, 15.0, AWAKE_GAUGE) == []


def test_no_reading_during_the_drain_is_a_harness_error_unless_the_drain_already_failed():
    late_only = readings((15.5, SLEEP_GAUGE[1]))
    with pytest.raises(HarnessError, match="no /metrics reading completed while the in-flight"):
        judges.drain_gauge_problems(late_only, 15.0, AWAKE_GAUGE)
    with pytest.raises(HarnessError):
        judges.drain_gauge_problems([], 15.0, AWAKE_GAUGE)
    assert judges.drain_gauge_problems(late_only, 15.0, AWAKE_GAUGE, require_sample=False) == []


# -- hole 4: liveness/concurrent-cycles --------------------------------------------------------
def _anything(message: str) -> bool:  # a finding that would match any message
    return True


def old_cycles_passed(g: Generation) -> bool:
    """The old per-request check, for comparison (no error case)."""
    return (g.finish_reason is None and not g.completion_tokens) or g.finish_reason in ("length", "abort")


def test_a_stream_cut_mid_generation_fails_even_where_the_finding_is_known():
    cut = gen([None], range(10))  # usage never came: completion_tokens stays None
    assert old_cycles_passed(cut)
    for known in (None, _anything):
        problems = judges.cycle_request_problems(cut, 64, allowed_503=False, cut_before_first_token=known)
        assert problems and problems[0].startswith("stream cut after 10 tokens with no finish_reason")


def test_no_token_and_no_reason_is_tolerated_only_as_the_known_finding():
    empty = gen([None])
    assert judges.cycle_request_problems(empty, 64, False, cut_before_first_token=_anything) == []
    assert judges.cycle_request_problems(empty, 64, False, cut_before_first_token=None)[0].startswith(
        "request ended with no finish_reason and no token")
    assert judges.cycle_request_problems(gen([]), 64, False, None)  # no choice at all


def test_cycle_requests_are_judged_on_tokens_received():
    assert judges.cycle_request_problems(gen(["length"], range(64), usage=64), 64, False, None) == []
    assert judges.cycle_request_problems(gen(["abort"], range(5)), 64, False, None) == []
    short = gen(["length"], range(40), usage=64)  # usage claims all, the client got 40
    assert old_cycles_passed(short)
    assert judges.cycle_request_problems(short, 64, False, None)[0].startswith(
        "finish_reason 'length' after 40 of 64 tokens received")
    assert judges.cycle_request_problems(gen(["stop"], range(3)), 64, False, None)[0].startswith(
        "request ended with 'stop'")
    assert judges.cycle_request_problems(gen(error=RuntimeError("x")), 64, True, None)[0].startswith(
        "request failed: RuntimeError")


# -- hole 5: custody/abort-requests, the request not named --------------------------------------
def test_the_request_not_named_must_run_in_full():
    size = 500
    assert judges.full_run_problems(gen(["length"], range(size), usage=size), size) == []
    # Old: only finish_reason == "abort" failed; these all passed.
    errored = judges.full_run_problems(gen([], range(100), error=RuntimeError("reset")), size)
    assert any(p.startswith("request raised RuntimeError") for p in errored)
    unfinished = judges.full_run_problems(gen([None], range(size)), size)
    assert any(p.startswith("finish reasons [None], expected all 'length'") for p in unfinished)
    truncated = judges.full_run_problems(gen(["length"], range(300), usage=size), size)
    assert truncated[0] == f"received 300 of {size} tokens"


# -- hole 6: misuse/inproc-wait-refused-cleanly --------------------------------------------------
REF = [5, 6, 7, 8]


def out(ids, finished=False, reason=None):
    return {"token_ids": list(ids), "finished": finished, "finish_reason": reason, "phase": "awake"}


WHOLE = Delivery("in-flight", [out([5]), out([5, 6]), out(REF, True, "length")])
LOST = Delivery("in-flight", [out([5]), out([5, 6], True, "abort")])
REFUSED = Called("sleep", None, {"type": "ValueError",
                                 "message": "'wait' pause mode is not supported in inproc-engine mode"})
RETURNED = Called("sleep", None)
WOKE = Called("wake_up", True)


def test_an_accepted_lossy_in_process_drain_fails():
    # Old: the test skipped whenever sleep(mode="wait") returned.
    problems = inproc_wait_problems(RETURNED, {"is_sleeping": True}, WOKE, {"is_sleeping": False},
                                    True, LOST, REF)
    assert problems
    assert all(p.startswith("accepted in-process sleep(mode='wait'): ") for p in problems)
    assert any("finish reason 'abort', expected 'length'" in p for p in problems)


def test_an_accepted_clean_drain_passes_and_incoherent_state_fails():
    assert inproc_wait_problems(RETURNED, {"is_sleeping": True}, WOKE, {"is_sleeping": False},
                                True, WHOLE, REF) == []
    awake = inproc_wait_problems(RETURNED, {"is_sleeping": False}, WOKE, {"is_sleeping": False},
                                 True, WHOLE, REF)
    assert awake == ["accepted in-process sleep(mode='wait'): returned but the engine is not asleep: "
                     "is_sleeping False"]
    stuck = inproc_wait_problems(RETURNED, {"is_sleeping": True}, Called("wake_up", None, {
        "type": "RuntimeError", "message": "x"}), {"is_sleeping": True}, True, WHOLE, REF)
    assert any("wake_up() afterwards" in p for p in stuck)
    assert any("engine state after the wake" in p for p in stuck)


def test_a_refusal_must_name_wait_and_leave_the_engine_as_it_was():
    assert inproc_wait_problems(REFUSED, {"is_sleeping": False}, None, None, True, WHOLE, REF) == []
    vague = Called("sleep", None, {"type": "ValueError", "message": "not supported"})
    assert inproc_wait_problems(vague, {"is_sleeping": False}, None, None, True, WHOLE, REF)[0].startswith(
        "refused sleep(mode='wait'): the error does not name the wait mode")
    asleep = inproc_wait_problems(REFUSED, {"is_sleeping": True}, None, None, True, WHOLE, REF)
    assert asleep[0].startswith("refused sleep(mode='wait'): engine state after the refusal")
    cut = inproc_wait_problems(REFUSED, {"is_sleeping": False}, None, None, True, LOST, REF)
    assert cut and all(p.startswith("refused sleep(mode='wait'): request in flight: ") for p in cut)
    hung = inproc_wait_problems(REFUSED, {"is_sleeping": False}, None, None, False,
                                Delivery("in-flight", [out([5])]), REF)
    assert "refused sleep(mode='wait'): the request in flight did not finish" in hung


# -- the expectations file agrees with these judgements ----------------------------------------
def test_the_finding_signature_matches_the_ran_while_asleep_message():
    from fixtures.spec.catalog import load_catalog
    from fixtures.spec.expectations import Instance, for_instance, load_expectations

    expectations = load_expectations(load_catalog())
    instance = Instance(profile="0.32", release="0.32.0", variant="MRV1-eager", transport="http",
                        params=("level1",), platform="cpu")
    found, _ = for_instance(expectations, "safety/no-request-while-asleep", ("finding",), instance)
    assert found is not None
    met = StateView(True, False, SLEEP_GAUGE[1])
    ran = judges.asleep_hold_problems(gen(["length"], range(TOKENS)), 1, 0, 200,
                                      reply(200, {"status": "resumed"}), met)
    assert found.matches("; ".join(ran))
    # A crash on /resume, or a request that failed, is not the finding.
    assert not found.matches(judges.resume_refusal_problems(reply(500, "x"), ASLEEP, ASLEEP, 200)[0])
    failed = judges.asleep_hold_problems(gen(error=RuntimeError("boom")), 1, 1, 200, reply(200), met)
    assert not found.matches(failed[0])


def test_cut_before_first_token_is_tolerated_only_in_the_findings_scope():
    from fixtures.spec.catalog import load_catalog
    from fixtures.spec.expectations import Instance, finding_reached, load_expectations

    expectations = load_expectations(load_catalog())

    def known(profile: str, release: str) -> bool:
        instance = Instance(profile=profile, release=release, variant="MRV1-eager", transport="http",
                            platform="cpu")
        return finding_reached(expectations, "custody/abort-before-first-token", instance)

    assert known("0.32", "0.32.0")
    assert not known("0.33", "0.33.0")


# -- misuse/release-kv-out-of-order: a refusal is a 4xx (issue 22, hole 9) ------------------

def test_an_out_of_order_release_is_refused_only_by_a_4xx_naming_the_precondition():
    named = {"error": {"message": "release_kv_cache_memory() requires a completed pause first"}}
    assert judges.release_refusal_problems(reply(400, named), "completed pause") == []
    # 0.32's 500 naming the precondition: its own failure message, never a refusal.
    server = judges.release_refusal_problems(reply(500, named), "completed pause")
    assert server and server[0].startswith("refused with 500 (a server error) naming 'completed pause', "
                                           "expected a 4xx (the caller's error)")
    crash = judges.release_refusal_problems(reply(500, "Internal Server Error"), "completed pause")
    assert crash[0].startswith("answered 500 (a server error) without naming 'completed pause'")
    assert judges.release_refusal_problems(reply(409, {"error": "busy"}), "resident")[0].startswith(
        "refused, but the error does not name 'resident'")
    assert judges.release_refusal_problems(reply(200, {}), "resident")[0].startswith("expected a refusal")


# -- results read and now asserted (issue 22, hole 10) ---------------------------------------

def test_the_request_running_at_a_dp_pause_must_end_as_its_mode_says():
    cut = gen(["abort"], range(5), usage=5)
    cut.max_tokens = TOKENS
    whole = gen(["length"], range(TOKENS), usage=TOKENS)
    whole.max_tokens = TOKENS
    assert judges.paused_request_problems(cut, "abort") == []
    assert judges.paused_request_problems(whole, "wait") == []
    assert judges.paused_request_problems(whole, "keep") == []
    # done, but not as the mode says: a keep pause that lost the request, an abort that ran it out.
    assert judges.paused_request_problems(cut, "keep")[0] == "finish reasons ['abort'], expected all 'length'"
    assert judges.paused_request_problems(whole, "abort")
    unsized = gen(["length"], range(TOKENS))
    with pytest.raises(HarnessError):
        judges.paused_request_problems(unsized, "wait")


# -- liveness/concurrent-cycles: requests finish whole, excuses only the finding's shape -------
# (issue 22, hole 3)

def _cut_finding():
    from fixtures.spec.catalog import load_catalog
    from fixtures.spec.expectations import Instance, load_expectations, reached

    run = Instance(profile="0.32", release="0.32.0", variant="MRV1-eager", transport="http", platform="cpu")
    finding = reached(load_expectations(load_catalog()), "custody/abort-before-first-token", run)
    assert finding is not None
    return finding.matches


def test_cycles_where_nothing_generated_fail_even_if_every_request_is_excused():
    nothing = [gen([None]) for _ in range(6)]
    problems, excused = judges.cycles_problems(nothing, 64, False, _cut_finding())
    assert excused == 6
    assert problems == ["none of the 6 requests finished whole (64 tokens, 'length'): the cycles left "
                        "nothing generated"]
    refused = [gen(error=RuntimeError("HTTP 503: Generation is paused")) for _ in range(3)]
    assert judges.cycles_problems(refused, 64, True, None)[0][-1].startswith("none of the 3 requests")
    whole = [*nothing, gen(["length"], range(64), usage=64)]
    assert judges.cycles_problems(whole, 64, False, _cut_finding()) == ([], 6)


def test_only_the_findings_shape_is_excused():
    matches = _cut_finding()
    assert judges.cycle_request_problems(gen([None]), 64, False, matches) == []
    # No token received, but usage says the engine generated some: not a cut before the first token.
    counted = gen([None], usage=12)
    problems = judges.cycle_request_problems(counted, 64, False, matches)
    assert problems[0].startswith("request ended with no finish_reason")
    raised = gen([None], error=RuntimeError("reset"))
    assert judges.cycle_request_problems(raised, 64, False, matches)[0].startswith("request failed")
