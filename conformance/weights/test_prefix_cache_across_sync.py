"""Prefix caches across a sync: a prompt whose prefix was cached under checkpoint A, served
after a sync of B. Where the path clears the cache (pause's clear_cache, the default, or an
explicit /reset_prefix_cache) nothing cached under A may be reused and the output is B's
fresh run; where it keeps the cache (pause with clear_cache=false and finish alone: vLLM
leaves the reset to the caller) output unlike B's fresh run must show the reuse in
cached_tokens."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is
from fixtures.judging.delivery import first_difference
from fixtures.judging.weight_judges import reused_prefix_problems

# Long enough to fill several KV blocks, so a reused prefix shows in cached_tokens.
BASE = "Weights change between these words, but a cached prefix does not know it yet. " * 4
TOKENS = 32
PATHS = {  # name: (pause clear_cache, explicit reset before resume, cache cleared)
    "pause-clears": (None, False, True),
    "explicit-reset": (False, True, True),
    "cache-kept": (False, False, False),
}


def run(engine, prompt: str):
    gen = engine.complete(prompt, TOKENS)
    if gen.error is not None or gen.cached_tokens is None:
        raise HarnessError(f"no completion with prompt_tokens_details.cached_tokens: {gen.summary()}")
    return gen


def reset_prefix_cache(engine) -> None:
    reply = engine.control.call("POST", "/reset_prefix_cache")
    if reply.status != 200:
        raise HarnessError(f"/reset_prefix_cache failed: {reply.describe()}")


@pytest.mark.behaviour("weights/prefix-cache-across-sync")
@pytest.mark.parametrize("path", list(PATHS))
def test_prefix_cache_across_sync(goldens, checkpoints, engine, weights, note, path):
    clear, reset, cleared = PATHS[path]
    prompt = f"[{path}] {BASE}"
    run(engine, prompt)
    if run(engine, prompt).cached_tokens == 0:
        raise HarnessError("a repeated prompt shows no cached tokens: is prefix caching on?")
    reply_is(engine.control.pause(mode="keep", clear_cache=clear), 200, {"status": "paused"})
    weights.push(checkpoints["B"], f"prefix-{path}")
    if reset:
        reset_prefix_cache(engine)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    judged = run(engine, prompt)
    reset_prefix_cache(engine)
    fresh = run(engine, prompt)
    if fresh.cached_tokens:
        raise HarnessError(f"B's fresh run reused {fresh.cached_tokens} cached tokens after a reset")
    if not cleared:
        at = first_difference(judged.token_ids, fresh.token_ids)
        note(f"{path}: {judged.cached_tokens} prompt tokens reused from the cache; the output "
             + ("equals B's fresh run" if at is None else f"leaves B's fresh run at token {at}"))
    problems = reused_prefix_problems(judged.token_ids, fresh.token_ids, judged.cached_tokens,
                                      cleared, f"{path}: the prompt after the sync")
    assert not problems, "; ".join(problems)
