"""Which weights sampled each token, as vLLM reports it over HTTP: the weight-version spans of a
finished output on /inference/v1/generate, for a request run before a sync, one streamed and
held by a keep pause across it, and one run after it."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import span_problems, switch_span_problems
from fixtures.observing.client import wait_until
from fixtures.observing.engine import SETTLE_S
from fixtures.observing.tokens_api import TokensClient, TokensRun

NEW_VERSION = "spans-http-B"


def run_span_problems(run: TokensRun, size: int, labels: list[str], what: str) -> list[str]:
    if run.error is not None or run.final is None:
        return [f"{what}: no finished output ({run.summary()})"]
    if len(run.token_ids) != size:
        return [f"{what}: {len(run.token_ids)} tokens, expected {size} ({run.summary()})"]
    return span_problems(run.spans, size, labels, what)


@pytest.mark.behaviour("weights/version-spans")
def test_version_spans(checkpoints, engine, weights):
    tokens = TokensClient(engine.server.url, engine.server.config.served_model_name,
                          engine.request_timeout)
    prompt = tokens.tokenize(golden.HTTP_PROMPT)
    size = engine.in_flight_tokens()  # long enough that the pause lands part way through
    old = weights.version()

    before = tokens.generate(prompt, size)
    problems = run_span_problems(before, size, [old], "a request run before the sync")

    held = tokens.stream(prompt, size)
    if not wait_until(lambda: bool(held.token_ids) or held.done.is_set(), engine.request_timeout):
        raise HarnessError(f"the streamed request produced no token in {engine.request_timeout:.0f} s")
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    held.done.wait(SETTLE_S)  # chunks already on their way arrive; it must not end
    seen = len(held.token_ids)
    if held.done.is_set() or seen >= size:
        raise HarnessError(f"the request was not held part way at the pause ({held.summary()}): "
                           f"nothing would run across the sync")
    weights.push(checkpoints["B"], NEW_VERSION)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    if not held.done.wait(engine.request_timeout):
        problems.append(f"the held request did not finish within {engine.request_timeout:.0f} s "
                        f"of the resume ({held.summary()})")
    else:
        what = f"a request held by a keep pause across the sync ({seen} tokens at the pause)"
        problems += run_span_problems(held, size, [old, NEW_VERSION], what)
        if held.spans is not None and len(held.token_ids) == size:
            problems += switch_span_problems(held.spans, held.token_ids, before.token_ids, seen, what)

    after = tokens.generate(prompt, golden.TOKENS)
    problems += run_span_problems(after, golden.TOKENS, [NEW_VERSION], "a request run after the sync")
    assert not problems, "; ".join(problems)
