"""The prefix cache is dropped by transitions that release or clear it, kept by the others."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is
from fixtures.observing.engine import Engine

# Long enough to fill several KV blocks, so a cache hit is visible in cached_tokens.
BASE = "The prefix cache should remember this sentence, block after block, word for word. " * 4

SCENARIOS = {
    # name: (transition, cache expected to survive)
    "sleep-level0": (("sleep", 0), True),
    "sleep-level1": (("sleep", 1), False),
    "sleep-level2": (("sleep", 2), False),
    "pause-clear-cache": (("pause", True), False),
    "pause-keep-cache": (("pause", False), True),
    "pause-keep-mode": (("pause-keep", True), False),
}


def cached(engine: Engine, prompt: str) -> int:
    gen = engine.complete(prompt, 1)
    if gen.error is not None or gen.cached_tokens is None:
        raise HarnessError(f"no prompt_tokens_details.cached_tokens in the response: {gen.summary()}")
    return gen.cached_tokens


@pytest.mark.behaviour("prefix/reset-on-transition")
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_prefix_cache(engine, scenario):
    (kind, arg), survives = SCENARIOS[scenario]
    prompt = f"[{scenario}] {BASE}"
    cached(engine, prompt)
    warm = cached(engine, prompt)
    if warm == 0:
        raise HarnessError("a repeated prompt shows no cached tokens: is prefix caching on?")
    if kind == "sleep":
        reply_is(engine.control.sleep(arg), 200, {"status": "sleeping"})
        reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    else:
        mode = "keep" if kind == "pause-keep" else "abort"
        clear = None if kind == "pause-keep" else arg
        reply_is(engine.control.pause(mode, clear_cache=clear), 200, {"status": "paused"})
        reply_is(engine.control.resume(), 200, {"status": "resumed"})
    after = cached(engine, prompt)
    if survives:
        assert after > 0, f"{scenario}: the prefix cache was dropped (cached_tokens 0, was {warm})"
    else:
        assert after == 0, f"{scenario}: the prefix cache survived (cached_tokens {after}, was {warm})"
