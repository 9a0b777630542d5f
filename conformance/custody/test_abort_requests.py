"""POST /abort_requests ends exactly what it names."""

import time

import pytest

from fixtures import judges
from fixtures.engine import FREEZE_WINDOW_S, SETTLE_S, received


@pytest.mark.behaviour("custody/abort-requests")
@pytest.mark.parametrize("selector", ["by-id", "all"])
def test_abort_requests(engine, selector):
    named, size = engine.start_in_flight(f"abort me {selector}", request_id=f"named-{selector}")
    other, _ = engine.start_in_flight(f"leave me {selector}", request_id=f"other-{selector}",
                                      size=size)
    ids = [f"cmpl-named-{selector}-0"] if selector == "by-id" else []
    reply = engine.control.abort_requests(ids)
    assert reply.status == 200 and reply.body.get("status") == "aborted", reply.describe()
    assert named.done.wait(engine.request_timeout), "the named request did not end"
    problems = judges.aborted(named, size)
    if selector == "by-id":
        time.sleep(SETTLE_S)
        before = received(other)
        time.sleep(FREEZE_WINDOW_S)
        if received(other) <= before and not other.done.is_set():
            problems.append(f"the request not named stopped too: {other.summary()}")
        if other.finish_reason == "abort":
            problems.append("the request not named was aborted")
        engine.control.abort_requests()  # end it; the test is over
    else:
        assert other.done.wait(engine.request_timeout), "the second request did not end"
        problems += [f"second: {p}" for p in judges.aborted(other, size)]
    assert not problems, "; ".join(problems)
