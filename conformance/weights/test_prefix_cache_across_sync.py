"""Prefix caches across a sync: a prompt whose prefix was cached under checkpoint A, served
after a sync of B. Where the path clears the cache (pause's clear_cache, the default, or an
explicit /reset_prefix_cache) nothing cached under A may be reused and the output is B's
fresh run; where it keeps it (pause with clear_cache=false and finish alone: vLLM leaves the
reset to the caller) output unlike B's fresh run must show the reuse in cached_tokens. In every
path, A's fresh run means the sync never reached the output.

Both fresh runs come from engines started on A and on B (fixtures/judging/weight_references.py),
never from this engine after the sync: there a sync that never landed gives A's run on both
sides, and a /reset_prefix_cache that does not clear gives the judged output back as "fresh".
So the explicit reset is judged only as the path's own step: refused, it fails the test (the
caller's way to clear was refused), and a reset that answers but keeps the cache shows as reuse
in the judged run. What stays a harness error comes before the sync: a repeated prompt under A
that reuses nothing means prefix caching is off, and there is nothing to judge."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is
from fixtures.judging.delivery import first_difference
from fixtures.judging.weight_judges import reused_prefix_problems
from fixtures.judging.weight_references import PREFIX_PATHS, PREFIX_TOKENS, prefix_prompt

PATHS = {  # name: (pause clear_cache, explicit reset before resume, cache cleared)
    "pause-clears": (None, False, True),
    "explicit-reset": (False, True, True),
    "cache-kept": (False, False, False),
}


def cached_under_a(engine, prompt: str) -> None:
    """The precondition: the prompt run twice under A, the second reusing the first's prefix."""
    for _ in range(2):
        gen = engine.complete(prompt, PREFIX_TOKENS)
        if gen.error is not None or gen.cached_tokens is None:
            raise HarnessError(f"no completion with prompt_tokens_details.cached_tokens: {gen.summary()}")
    if gen.cached_tokens == 0:
        raise HarnessError("a repeated prompt shows no cached tokens: is prefix caching on?")


@pytest.mark.behaviour("weights/prefix-cache-across-sync")
@pytest.mark.parametrize("path", PREFIX_PATHS)
def test_prefix_cache_across_sync(goldens, references, checkpoints, engine, weights, note, path):
    clear, reset, cleared = PATHS[path]
    prompt = prefix_prompt(path)
    cached_under_a(engine, prompt)
    reply_is(engine.control.pause(mode="keep", clear_cache=clear), 200, {"status": "paused"})
    weights.push(checkpoints["B"], f"prefix-{path}")
    problems = []
    if reset:
        reply = engine.control.call("POST", "/reset_prefix_cache")
        if reply.status != 200:
            problems.append(f"{path}: /reset_prefix_cache before /resume was refused: {reply.describe()}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    judged = engine.complete(prompt, PREFIX_TOKENS)
    fresh, old = references.prefix["B"][path], references.prefix["A"][path]
    if judged.error is not None:
        problems.append(f"{path}: the prompt after the sync failed: {judged.summary()}")
    else:
        if not cleared:
            at = first_difference(judged.token_ids, fresh)
            note(f"{path}: {judged.cached_tokens} prompt tokens reused from the cache; the output "
                 + ("equals B's fresh run" if at is None else f"leaves B's fresh run at token {at}"))
        problems += reused_prefix_problems(judged.token_ids, fresh, old, judged.cached_tokens,
                                           cleared, f"{path}: the prompt after the sync")
    assert not problems, "; ".join(problems)
