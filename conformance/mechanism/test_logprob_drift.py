"""Per-token logprobs after a level-1 sleep and full wake, against the pre-sleep run."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.assertions import reply_is
from thresholds import judges

PROMPTS = ("drift probe one", "drift probe two: a longer prompt with more context", "3")
TOKENS = 32


def logprobs(engine):
    series = []
    for prompt in PROMPTS:
        gen = engine.complete(prompt, TOKENS, logprobs=1)
        if gen.error is not None or len(gen.logprobs) != TOKENS:
            raise HarnessError(f"no per-token logprobs for {prompt!r}: {gen.summary()}")
        series.extend(gen.logprobs)
    return series


@pytest.mark.behaviour("mechanism/logprob-drift")
def test_logprob_drift(seeded_engine, limits, measure):
    before = logprobs(seeded_engine)
    reply_is(seeded_engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(seeded_engine.control.wake_up(), 200, {"status": "awake"})
    measure(judges.logprob_drift(before, logprobs(seeded_engine), limits))
