"""The #44483 regression: a partial wake must not let the scheduler run a request, over HTTP and
through the Python API. On several data-parallel engines one request is pinned to each, and
each must be held on its engine."""

from collections.abc import Callable

import pytest

from fixtures.judging.assertions import held_problems
from fixtures.judging.custody import completed_problems
from fixtures.judging.protocol_judges import answer_problems
from fixtures.protocol.generation import where
from fixtures.protocol.parts import Answer

MAX_TOKENS = 32
TAGS = ("weights", "kv_cache")
PROMPT = "held across a partial wake"


def answered(what: str, call: Callable[[], Answer]) -> Answer:
    """The call's answer; none within the request timeout is the engine's failure, named."""
    try:
        return call()
    except AssertionError as exc:  # "<call> got no answer within N s", from either transport
        raise AssertionError(f"{what}: {exc}") from None


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: #44483's order alone, over HTTP and through AsyncLLM with its engine
# processes (data parallelism needs them); a several-engine server takes the whole machine.
@pytest.mark.topology_params(offline_engine=("http", "AsyncLLM-MP1"), first="weights")
@pytest.mark.parametrize("first", TAGS, ids=lambda tag: f"{tag}-first")
def test_partial_wake_holds_requests(lifecycle, topology, first):
    control, generate = lifecycle.control, lifecycle.generate
    second = next(tag for tag in TAGS if tag != first)
    references = generate.references(PROMPT, MAX_TOKENS, topology.ranks)
    problems = answer_problems(answered("the sleep", lambda: control.sleep(1)))
    problems += answer_problems(answered(f"the wake of {first!r} alone", lambda: control.wake_up([first])),
                                awake=False)
    assert not problems, "; ".join(problems)

    generate.start(PROMPT, MAX_TOKENS, topology.ranks)
    problems = held_problems(generate.watch_held(f"only {first!r} awake"), f"only {first!r} awake")
    assert not problems, "; ".join(problems)
    full = answered(f"the full wake ({second!r} after {first!r})", lambda: control.wake_up([second]))
    problems = answer_problems(full, awake=True)
    timeout = generate.timeout
    ended = generate.await_end(timeout)
    problems += [f"{where(rank)}no end to the request within {timeout:.0f} s of the full wake "
                 f"({second!r} after {first!r}); observed {seen.summary}"
                 for rank, seen in ended.items() if not seen.ended]
    problems += [f"the request after waking {second!r}: {where(rank)}{p}" for rank, seen in ended.items()
                 if seen.ended for p in completed_problems(seen, MAX_TOKENS, references[rank])]
    assert not problems, "; ".join(problems)
