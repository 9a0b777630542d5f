"""A request submitted through the Python API while only one memory tag is awake is held. On
several data-parallel engines one request is pinned to each (data_parallel_rank), and each must
be held on its engine."""

import pytest

from fixtures.judging import delivery
from fixtures.judging.offline_judges import return_problems
from fixtures.observing.offline import Delivery, OfflineClient

PROMPT = "A request that arrives while half of the engine memory is still asleep must wait."
TOKENS = 48
TAGS = ("weights", "kv_cache")


def held_rid(rank: int | None) -> str:
    return "held" if rank is None else f"held-{rank}"


def delivered(offline: OfflineClient, rank: int | None) -> Delivery:
    return offline.deliveries().get(held_rid(rank), Delivery(held_rid(rank)))


def finished(seen: Delivery) -> bool:
    return bool(seen.outputs) and bool(seen.outputs[-1]["finished"])


def where(rank: int | None) -> str:
    return "" if rank is None else f"engine {rank}: "


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: AsyncLLM with its engine processes (data parallelism needs them), in
# #44483's order alone (a several-engine host takes the whole machine).
@pytest.mark.topology_params(offline_engine="AsyncLLM-MP1", first="weights")
@pytest.mark.parametrize("first", TAGS, ids=lambda tag: f"{tag}-first")
def test_partial_wake_holds_requests_offline(topology_offline, topology, first):
    offline, ranks = topology_offline, topology.ranks
    second = next(tag for tag in TAGS if tag != first)
    expected = {rank: offline.reference(PROMPT, TOKENS, rank) for rank in ranks}
    problems = return_problems(offline.call("sleep", level=1))
    problems += return_problems(offline.call("wake_up", tags=[first]), False)
    offline.phase("partial")
    for rank in ranks:
        offline.add(held_rid(rank), PROMPT, TOKENS, kind="delta", rank=rank)
    offline.collect({held_rid(rank): "started" for rank in ranks}, timeout=offline.hold_window(TOKENS))
    # Judged on the tokens the frontend processed, read before the wake is even sent: which
    # phase the first output is stamped with races the wake's own return.
    before_wake = {rank: (offline.progress(held_rid(rank)), len(delivered(offline, rank).outputs))
                   for rank in ranks}
    problems += [f"{where(rank)}the request started while only {first} was awake ({tokens} tokens "
                 f"processed, {outputs} outputs delivered)"
                 for rank, (tokens, outputs) in before_wake.items() if tokens or outputs]
    problems += return_problems(offline.call("wake_up", then="awake", tags=[second]), True)
    offline.collect({held_rid(rank): "finished" for rank in ranks})
    held = {rank: delivered(offline, rank) for rank in ranks}
    problems += [f"{where(rank)}the request did not finish within {offline.timeout:.0f} s of the "
                 f"full wake" for rank, seen in held.items() if not finished(seen)]
    problems += [where(rank) + p for rank, seen in held.items()
                 for p in delivery.exactly_once_problems("delta", seen.outputs, expected[rank])]
    assert not problems, "; ".join(problems) + "; observed " + " | ".join(
        seen.summary() for seen in held.values())
