"""POST /abort_requests ends exactly what it names."""

import time

import pytest

from fixtures.judging import judges
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S, received_tokens


@pytest.mark.behaviour("custody/abort-requests")
@pytest.mark.parametrize("selector", ["by-id", "all"])
def test_abort_requests(engine, selector):
    named, size = engine.start_in_flight(f"abort me {selector}", request_id=f"named-{selector}")
    other, _ = engine.start_in_flight(f"leave me {selector}", request_id=f"other-{selector}",
                                      size=size)
    ids = [f"cmpl-named-{selector}-0"] if selector == "by-id" else []
    sent = time.monotonic()
    reply = engine.control.abort_requests(ids)
    assert reply.status == 200 and isinstance(reply.body, dict) and reply.body.get("status") == "aborted", (
        f"expected 200 {{'status': 'aborted'}}; observed {reply.describe()}"
    )
    assert named.done.wait(engine.request_timeout), (
        f"named request did not end within {engine.request_timeout:.0f} s of the abort: {named.summary()}"
    )
    # A request that had ended before the abort was sent is the harness's lateness: an error.
    problems = judges.standing_problems([f"named request: {p}" for p in judges.abort_problems(named, size)],
                                        judges.ended_before(named, sent, "abort"))
    if selector == "by-id":
        # The request not named runs on, undisturbed, to its full length.
        time.sleep(SETTLE_S)
        before = received_tokens(other)
        time.sleep(FREEZE_WINDOW_S)
        if received_tokens(other) <= before and not other.done.is_set():
            problems.append(f"request not named: stopped producing tokens after the abort "
                            f"({before} tokens, none in {FREEZE_WINDOW_S:.0f} s): {other.summary()}")
            engine.control.abort_requests()  # stalled: end it rather than wait out the timeout
        elif not other.done.wait(engine.request_timeout):
            problems.append(f"request not named: did not finish within {engine.request_timeout:.0f} s: "
                            f"{other.summary()}")
        else:
            problems += [f"request not named: {p}" for p in judges.full_run_problems(other, size)]
    else:
        assert other.done.wait(engine.request_timeout), (
            f"second request did not end within {engine.request_timeout:.0f} s of the abort: "
            f"{other.summary()}"
        )
        problems += judges.standing_problems(
            [f"second request: {p}" for p in judges.abort_problems(other, size)],
            judges.ended_before(other, sent, "abort"))
    assert not problems, "; ".join(problems)
