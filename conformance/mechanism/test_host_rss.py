"""Host memory of the whole server process tree across sleep/wake cycles (real on CPU too)."""

import pytest

from fixtures.judging import judges as contract
from fixtures.judging.assertions import reply_is
from fixtures.launching.external import needs_own_process
from fixtures.observing.device import tree_rss_bytes
from thresholds import judges

CYCLES = 10
REQUEST_TOKENS = 16


@pytest.mark.behaviour("mechanism/host-rss-stable")
def test_host_rss_stable(engine, limits, measure, record_property):
    needs_own_process(engine.server)
    engine.complete("warm the allocator before measuring", 64)
    series = []
    for cycle in range(1, CYCLES + 1):
        reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
        reply_is(engine.control.wake_up(), 200, {"status": "awake"})
        gen = engine.complete("one request per cycle", REQUEST_TOKENS)
        # A failure, not a harness error: an awake engine that does not serve a request is the
        # engine's behaviour, and memory read beside a request that never ran measures nothing.
        problems = contract.completion_problems(gen, REQUEST_TOKENS)
        assert not problems, f"cycle {cycle}, the request after the wake: " + "; ".join(problems)
        series.append(tree_rss_bytes(engine.server.proc.pid))
    record_property("rss_bytes_per_cycle", series)
    measure(judges.host_rss_stable(series, limits))
