"""Contract judges on hand-made records: each passes what it should and catches the break."""

from __future__ import annotations

import pytest

from fixtures.judging import judges
from fixtures.observing.client import Generation, StreamError
from thresholds import load_limits


def record(reasons, tokens, ids=(), error=None) -> Generation:
    gen = Generation(stream=True)
    gen.finish_reasons = dict(enumerate(reasons))
    gen.completion_tokens = tokens
    gen.token_ids = list(ids)
    gen.error = error
    return gen


def test_aborted_accepts_a_cut_request_and_catches_the_others():
    assert judges.abort_problems(record(["abort"], 10), 100) == []
    assert judges.abort_problems(record(["abort", "abort"], 20), 100, n=2) == []
    ran_out = judges.abort_problems(record(["length"], 100), 100)
    assert any("expected all 'abort'" in p for p in ran_out)
    assert any("ran to its end" in p for p in ran_out)
    assert judges.abort_problems(record(["abort", None], 5), 100, n=2)  # one choice left hanging
    assert judges.abort_problems(record([None], 0), 100)  # ended with no finish reason


def test_completed_checks_length_reason_and_ids():
    ids = list(range(8))
    assert judges.completion_problems(record(["length"], 8, ids), 8, reference=ids) == []
    lost_token = judges.completion_problems(record(["length"], 8, [*ids[:3], *ids[4:], 99]), 8, reference=ids)
    assert any("from position 3" in p for p in lost_token)
    assert judges.completion_problems(record(["abort"], 3, ids[:3]), 8)
    assert judges.completion_problems(record(["length"], 7, ids[:7]), 8)
    assert judges.completion_problems(record(["length"], 8, ids, error=RuntimeError("x")), 8)


def test_frozen_needs_a_still_count_and_an_unfinished_request():
    assert judges.freeze_problems(40, 40, 100) == []
    assert judges.freeze_problems(40, 52, 100) == ["12 tokens arrived while paused (40 -> 52)"]
    assert judges.freeze_problems(100, 100, 100)  # finished before the pause: nothing was frozen


def test_rejected_while_paused_reads_both_transports():
    body = {"error": {"message": "Generation is paused. Please retry after it resumes.",
                      "type": "ServiceUnavailableError", "code": 503}}
    assert judges.rejection_problems(record([], None, error=StreamError(503, body))) == []
    event = {"error": {**body["error"], "type": "InternalServerError"}}  # chat stream: HTTP 200
    assert judges.rejection_problems(record([], None, error=StreamError(200, event))) == []
    assert judges.rejection_problems(record(["length"], 8))  # held and served instead
    other = {"error": {"message": "queue full", "code": 503}}
    assert judges.rejection_problems(record([], None, error=StreamError(503, other)))


@pytest.mark.parametrize(("observed", "ok"), [(0.0, True), (0.01, True), (0.0100001, False)])
def test_logprob_limit_at_below_and_above(observed, ok):
    limit = load_limits()["golden/after-wake:max_abs_logprob_diff"]
    message = limit.check(observed)
    assert (message is None) == ok
    if not ok:
        assert "observed" in message and "limit <= 0.01" in message


def test_a_request_that_ended_before_the_pause_was_sent_voids_the_trial() -> None:
    gen = Generation(stream=False, max_tokens=8, started=10.0, ended=12.0)
    gen.finish_reasons = {0: "length"}
    assert "ended 1.00 s before the pause was sent" in (judges.ended_before(gen, sent=13.0) or "")


def test_a_pause_the_starved_client_sent_late_voids_a_failed_trial() -> None:
    """0.30.0 sweep, dp2 abort: the client saw the request at t=0, meant to pause 0.5 s later,
    and sent the pause at 40.9 s; the request had just ended by its length (not an engine fault)."""
    late = judges.client_late(seen_at=100.0, sent_at=140.9, meant_s=0.5, slack_s=3.0)
    assert late is not None and "sent the call 40.9 s after it saw the request running" in late
    assert judges.client_late(seen_at=100.0, sent_at=103.4, meant_s=0.5, slack_s=3.0) is None
    assert judges.client_late(seen_at=None, sent_at=140.9, meant_s=0.5, slack_s=3.0) is None


@pytest.mark.parametrize("ended", [None, 13.0, 20.0])
def test_a_request_open_when_the_pause_was_sent_is_judged(ended: float | None) -> None:
    # Still open, ended with the send, or after: the pause's rule applies (abort must have cut it).
    gen = Generation(stream=False, max_tokens=8, started=10.0, ended=ended)
    assert judges.ended_before(gen, sent=13.0) is None


def test_a_failed_trial_whose_request_ended_before_the_call_is_an_error_not_a_failure() -> None:
    """Seen with the engine core left unpinned: a 500-token request confirmed running ended
    (by its length) before /pause?mode=abort left the client; "ran to its end" is then the
    harness's lateness, not the engine's fault."""
    from fixtures.errors import HarnessError

    gen = Generation(stream=True, max_tokens=500, started=10.0, ended=11.6)
    gen.finish_reasons, gen.completion_tokens = {0: "length"}, 500
    problems = judges.abort_problems(gen, 500)
    assert problems  # what the judge says of the record alone
    with pytest.raises(HarnessError, match=r"ended 0\.40 s before the call was sent.*not judged"):
        judges.standing_problems(problems, judges.ended_before(gen, sent=12.0, call="call"))


@pytest.mark.parametrize("ended", [None, 12.0, 12.5])
def test_a_failed_trial_whose_request_was_open_at_the_call_stays_a_failure(ended) -> None:
    gen = Generation(stream=True, max_tokens=500, started=10.0, ended=ended)
    gen.finish_reasons, gen.completion_tokens = {0: "length"}, 500
    problems = judges.abort_problems(gen, 500)
    assert judges.standing_problems(problems, judges.ended_before(gen, sent=12.0, call="abort")) == problems


def test_a_passing_trial_stands_however_early_its_request_ended() -> None:
    gen = Generation(stream=True, max_tokens=500, started=10.0, ended=11.0)
    assert judges.standing_problems([], judges.ended_before(gen, sent=12.0, call="call")) == []
