"""A request cut before it produced anything still says how it ended."""

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import reply_is

TOKENS = 32


@pytest.mark.behaviour("custody/abort-before-first-token")
@pytest.mark.parametrize("api", ["completions", "chat"])
def test_abort_before_first_token(engine, api):
    reply_is(engine.control.pause("keep"), 200, {"status": "paused"})
    held = engine.gen.start("held, then aborted", TOKENS, stream=True, api=api)
    assert engine.wait_load(at_least=1) >= 1, "the held request was never accepted"
    reply_is(engine.control.pause("abort"), 200, {"status": "paused"})
    assert held.done.wait(engine.request_timeout), "the aborted stream did not end"
    problems = judges.abort_problems(held, TOKENS)
    assert not problems, "; ".join(problems)
