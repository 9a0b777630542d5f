"""Greedy output across /pause and /resume, with and without clearing the prefix cache."""

from __future__ import annotations

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging.assertions import reply_is

# Long enough to fill several KV blocks, so clear_cache=false leaves a prefix-cache hit to use.
PROMPT = "Paris is the capital of France. Berlin is the capital of Germany. " * 20
TOKENS = 24


@pytest.mark.behaviour("golden/pause-clear-cache")
@pytest.mark.parametrize("clear_cache", [True, False], ids=["clear", "keep-cache"])
def test_pause_clear_cache(engine, clear_cache):
    before = engine.complete(PROMPT, TOKENS)
    if judges.completion_problems(before, TOKENS):
        raise HarnessError(f"the greedy run before the pause failed: {before.summary()}")
    reply_is(engine.control.pause(clear_cache=clear_cache), 200, {"status": "paused"})
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    problems = []
    # Twice: the first run after the pause (cold cache or cached prefix), then a warm repeat.
    for run in ("first", "repeated"):
        after = engine.complete(PROMPT, TOKENS)
        problems += [f"{run} run: {p}"
                     for p in judges.completion_problems(after, TOKENS, reference=before.token_ids)]
    assert not problems, f"/pause?clear_cache={str(clear_cache).lower()} then /resume: " + "; ".join(problems)
