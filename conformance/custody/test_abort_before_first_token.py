"""A request cut before it produced anything still says how it ended."""

import uuid

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import reply_is

TOKENS = 32


@pytest.mark.behaviour("custody/abort-before-first-token")
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_abort_before_first_token(engine, api):
    reply_is(engine.control.pause("keep"), 200, {"status": "paused"})
    since, name = engine.log_mark(), f"held-{uuid.uuid4().hex[:12]}"
    held = engine.gen.start("held, then aborted", TOKENS, stream=True, api=api, request_id=name)
    engine.wait_added({name: held}, since)  # the engine holds it: the abort pause must end it
    reply_is(engine.control.pause("abort"), 200, {"status": "paused"})
    assert held.done.wait(engine.request_timeout), "the aborted stream did not end"
    problems = judges.abort_problems(held, TOKENS)
    assert not problems, "; ".join(problems)
