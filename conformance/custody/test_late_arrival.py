"""A request that arrives while the engine is paused: held or rejected, per profile. On several
data-parallel engines one request arrives pinned to each, and each meets its fate alone."""

import time

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import held_on_engines, reply_is
from fixtures.observing.engine import rank_headers
from fixtures.spec.profiles import MODES, PROFILES

MAX_TOKENS = 48
# A rejection is immediate; an engine that holds the request instead is caught here, not
# after the full request timeout.
REJECT_WITHIN_S = 5.0


def where(rank: int | None) -> str:
    return "" if rank is None else f"engine {rank}: "


@pytest.mark.behaviour("custody/late-arrival")
@pytest.mark.topologies("single", "dp2")
# Beyond one engine: one instance per mode (a several-engine server takes the whole machine).
@pytest.mark.topology_params(stream=True)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("mode", MODES)
def test_late_arrival(topology_engine, topology, mode, stream):
    engine = topology_engine
    fate = PROFILES[engine.profile].late_arrival[mode]
    prompt = f"arrives late during pause {mode}"
    references = engine.references(prompt, MAX_TOKENS, ranks=topology.ranks)
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    lates = {rank: engine.gen.start(prompt, MAX_TOKENS, stream=stream, headers=rank_headers(rank))
             for rank in topology.ranks}
    context = f"profile {engine.profile}, /pause?mode={mode}"

    if fate == "rejected":
        deadline = time.monotonic() + REJECT_WITHIN_S
        unanswered = [rank for rank, late in lates.items()
                      if not late.done.wait(max(0.0, deadline - time.monotonic()))]
        if unanswered:
            engine.control.resume()  # let the held requests end before the test does
            for late in lates.values():
                late.done.wait(engine.request_timeout)
            pytest.fail(f"profile {engine.profile}, mode {mode}: " + "; ".join(
                f"{where(rank)}no rejection within {REJECT_WITHIN_S:.0f} s; the request was held "
                f"instead: {lates[rank].summary()}" for rank in unanswered))
        problems = [where(rank) + p for rank, late in lates.items() for p in judges.rejection_problems(late)]
        assert not problems, f"profile {engine.profile}, mode {mode}: " + "; ".join(problems)
        reply_is(engine.control.resume(), 200, {"status": "resumed"})
        retries = {rank: engine.gen.start(prompt, MAX_TOKENS, stream=stream, headers=rank_headers(rank))
                   for rank in topology.ranks}
        for retry in retries.values():
            retry.done.wait(engine.request_timeout)
        engine.server.ensure_alive()
        problems = [where(rank) + p for rank, retry in retries.items()
                    for p in judges.completion_problems(retry, MAX_TOKENS, reference=references[rank])]
        assert not problems, "the same request after /resume: " + "; ".join(problems)
        return

    held_on_engines(engine, lates, context)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    for rank, late in lates.items():
        assert late.done.wait(engine.request_timeout), (
            f"{where(rank)}held request did not finish after /resume: {late.summary()}")
    problems = [where(rank) + p for rank, late in lates.items()
                for p in judges.completion_problems(late, MAX_TOKENS, reference=references[rank])]
    assert not problems, "held request after /resume: " + "; ".join(problems)
