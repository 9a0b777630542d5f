"""RFC #51476 §4 / PR #53082 on data parallelism (the PR's own end-to-end test runs DP=2): sleep
is a memory transition that needs a completed pause, refused through the DP client without any
engine changing state, and pause -> sleep -> wake -> resume then works on every engine."""

import pytest

from fixtures.judging import topology_judges as tj
from fixtures.judging.assertions import finished_fully, reply_is, state_on_every_engine
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE
from fixtures.observing.metrics import per_engine

MAX_TOKENS = 32
# Enough requests that the DP load balancer gives every engine some (it spreads by load).
REQUESTS_PER_ENGINE = 4


def send_and_finish(e, n: int, label: str, refuse_sleep: bool = False) -> None:
    """Requests for every engine; they finish in full, every engine finishing some. With
    refuse_sleep, an un-paused /sleep is sent while they run and must be refused."""
    before = per_engine(e.control.metrics_text(), tj.SUCCESS_TOTAL, n)
    sent = REQUESTS_PER_ENGINE * n
    gens = [e.gen.start(f"{label} {i}", MAX_TOKENS, stream=True) for i in range(sent)]
    e.wait_load(at_least=1)
    if refuse_sleep:
        refused = e.control.sleep(1)
        assert 400 <= refused.status < 500 and "pause" in str(refused.body).lower(), (
            f"an un-paused sleep must be refused with a client error naming the missing pause, "
            f"with requests running on the engines; observed {refused.describe()}")
        state_on_every_engine(e, n, "the refused /sleep?level=1", (False, False), AWAKE_GAUGE)
    for i, gen in enumerate(gens):
        assert gen.done.wait(e.request_timeout), (
            f"{label} #{i} did not finish within {e.request_timeout:.0f} s: {gen.summary()}")
        finished_fully(gen, MAX_TOKENS, f"{label} #{i}")
    after = per_engine(e.control.metrics_text(), tj.SUCCESS_TOTAL, n)
    problems = tj.served_problems(before, after, sent, label)
    assert not problems, "; ".join(problems)


@pytest.mark.behaviour("topology/layered-sleep-every-rank")
@pytest.mark.topologies("dp2")
def test_layered_sleep_every_rank(topology_engine, topology):
    e, n = topology_engine, topology.engines
    send_and_finish(e, n, "requests running at the un-paused sleep", refuse_sleep=True)

    reply_is(e.control.pause(mode="abort"), 200, {"status": "paused"})
    state_on_every_engine(e, n, "/pause?mode=abort", (True, True), AWAKE_GAUGE)
    reply_is(e.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    state_on_every_engine(e, n, "/sleep?level=1 after the pause", (True, True), SLEEP_GAUGE[1])
    reply_is(e.control.wake_up(), 200, {"status": "awake"})
    reply_is(e.control.resume(), 200, {"status": "resumed"})
    state_on_every_engine(e, n, "/wake_up and /resume", (False, False), AWAKE_GAUGE)
    send_and_finish(e, n, "requests after pause, sleep, wake and resume")
