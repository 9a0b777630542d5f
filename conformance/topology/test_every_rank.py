"""RFC #51476 §1-2 on data parallelism: every lifecycle call reaches every engine."""

import time

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import topology_judges as tj
from fixtures.judging.assertions import finished_fully, reply_is, state_on_every_engine
from fixtures.observing.client import Generation
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, Engine
from fixtures.observing.metrics import per_engine

MAX_TOKENS = 16
# Enough requests that the DP load balancer gives every engine some (it spreads by load).
REQUESTS_PER_ENGINE = 4


def watch_held(engine: Engine, gens: list[Generation], step: str) -> None:
    window = engine.hold_window(MAX_TOKENS)
    began = time.monotonic()
    while True:
        problems = tj.held_problems([(i, g.done.is_set(), len(g.chunks)) for i, g in enumerate(gens)],
                                    window, step)
        assert not problems, "; ".join(problems) + "; " + " | ".join(g.summary() for g in gens)
        if time.monotonic() - began >= window:
            return
        time.sleep(0.2)


@pytest.mark.behaviour("topology/every-rank-follows")
@pytest.mark.topologies("dp2")
# A rank the wake skipped leaves the DP resume waiting for it forever: the server is wedged.
@pytest.mark.ends_shared_server_on_failure
def test_every_rank_follows(topology_engine, topology):
    e, n = topology_engine, topology.engines

    reply_is(e.control.pause(mode="abort"), 200, {"status": "paused"})
    state_on_every_engine(e, n, "/pause?mode=abort", (True, True), AWAKE_GAUGE)
    reply_is(e.control.resume(), 200, {"status": "resumed"})
    state_on_every_engine(e, n, "/resume", (False, False), AWAKE_GAUGE)

    reply_is(e.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    state_on_every_engine(e, n, "/sleep?level=1", (True, True), SLEEP_GAUGE[1])
    reply_is(e.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    state_on_every_engine(e, n, "/wake_up?tags=weights", (True, True), SLEEP_GAUGE[1])

    before = per_engine(e.control.metrics_text(), tj.SUCCESS_TOTAL, n)
    sent = REQUESTS_PER_ENGINE * n
    gens = [e.gen.start(f"rank request {i}", MAX_TOKENS, stream=True) for i in range(sent)]
    counted = e.wait_load(at_least=sent, unless=lambda: any(g.done.is_set() or g.chunks for g in gens))
    if counted < sent and not any(g.done.is_set() or g.chunks for g in gens):
        # A harness error: the hold below means something only for requests the server holds;
        # one that never arrived cannot run, so watching it would pass on nothing.
        raise HarnessError(f"/load counted {counted} of the {sent} requests sent while only the weights "
                           f"were awake: " + " | ".join(g.summary() for g in gens))
    watch_held(e, gens, "requests sent while only the weights were awake")

    reply_is(e.control.wake_up(["kv_cache"]), 200, {"status": "awake"})
    state_on_every_engine(e, n, "/wake_up?tags=kv_cache", (False, False), AWAKE_GAUGE)
    for i, gen in enumerate(gens):
        assert gen.done.wait(e.request_timeout), (
            f"held request #{i} did not finish within {e.request_timeout:.0f} s of the full wake "
            f"(an engine the wake did not reach keeps it): {gen.summary()}")
        finished_fully(gen, MAX_TOKENS, f"held request #{i} after the full wake")
    after = per_engine(e.control.metrics_text(), tj.SUCCESS_TOTAL, n)
    problems = tj.served_problems(before, after, sent, "after the full wake")
    assert not problems, "; ".join(problems)

    reply_is(e.control.sleep(2), 200, {"status": "sleeping", "level": 2})
    state_on_every_engine(e, n, "/sleep?level=2", (True, True), SLEEP_GAUGE[2])
    reply_is(e.control.wake_up(), 200, {"status": "awake"})
    state_on_every_engine(e, n, "/wake_up", (False, False), AWAKE_GAUGE)
    finished_fully(e.complete("after the cycle", MAX_TOKENS), MAX_TOKENS, "a request after the cycle")
