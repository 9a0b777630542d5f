"""n>1 requests under an abort: every choice ends, and sampling works again after."""

import pytest

from fixtures.judging import custody, judges
from fixtures.judging.assertions import reply_is

N = 2
AFTER_TOKENS = 16


@pytest.mark.behaviour("custody/parallel-sampling-abort")
def test_parallel_sampling_abort(engine):
    # n > 1 needs sampling (vLLM refuses n > 1 with greedy); the sampling is seeded.
    gen, size = engine.start_in_flight("two choices, one abort", n=N, temperature=1.0)
    problems = custody.abort_fate_problems(engine, gen, size, lambda: engine.control.pause("abort"),
                                           {"status": "paused"}, n=N)
    assert not problems, "; ".join(problems)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    after = engine.complete("two choices again", AFTER_TOKENS, n=N, temperature=1.0)
    problems = judges.completion_problems(after, AFTER_TOKENS, n=N)
    assert not problems, "n=2 request after /resume: " + "; ".join(problems)
