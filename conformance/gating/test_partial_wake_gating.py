"""The #44483 regression: a partial wake must not let the scheduler run a request. On several
data-parallel engines one request is pinned to each, and each must be held on its engine."""

import time
from collections.abc import Callable

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import held_on_engines, reply_is
from fixtures.observing.client import Reply
from fixtures.observing.engine import rank_headers

MAX_TOKENS = 32
TAGS = ("weights", "kv_cache")
PROMPT = "held across a partial wake"


def where(rank: int | None) -> str:
    return "" if rank is None else f"engine {rank}: "


def answered(what: str, call: Callable[[], Reply]) -> Reply:
    """The call's reply; none within the request timeout is the engine's failure, named."""
    try:
        return call()
    except AssertionError as exc:  # ControlPlane: "<METHOD> <path> got no answer within N s"
        raise AssertionError(f"{what}: {exc}") from None


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: #44483's order alone (a several-engine server takes the whole machine).
@pytest.mark.topology_params(first="weights")
@pytest.mark.parametrize("first", TAGS, ids=lambda tag: f"{tag}-first")
def test_partial_wake_holds_requests(topology_engine, topology, first):
    engine = topology_engine
    second = next(tag for tag in TAGS if tag != first)
    references = engine.references(PROMPT, MAX_TOKENS, ranks=topology.ranks)
    reply_is(answered("the sleep", lambda: engine.control.sleep(1)), 200,
             {"status": "sleeping", "level": 1})
    reply_is(answered(f"the wake of {first!r} alone", lambda: engine.control.wake_up([first])),
             200, {"status": "sleeping"})

    held = {rank: engine.gen.start(PROMPT, MAX_TOKENS, headers=rank_headers(rank))
            for rank in topology.ranks}
    held_on_engines(engine, held, f"only {first!r} awake")

    reply_is(answered(f"the full wake ({second!r} after {first!r})",
                      lambda: engine.control.wake_up([second])), 200, {"status": "awake"})
    deadline = time.monotonic() + engine.request_timeout
    unfinished = [rank for rank, gen in held.items()
                  if not gen.done.wait(max(0.0, deadline - time.monotonic()))]
    assert not unfinished, "; ".join(
        f"{where(rank)}no end to the request within {engine.request_timeout:.0f} s of the full "
        f"wake ({second!r} after {first!r}); observed {held[rank].summary()}" for rank in unfinished)
    problems = [where(rank) + p for rank, gen in held.items()
                for p in judges.completion_problems(gen, MAX_TOKENS, reference=references[rank])]
    assert not problems, f"the request after waking {second!r}: " + "; ".join(problems)
