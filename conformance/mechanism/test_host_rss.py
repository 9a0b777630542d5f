"""Host memory of the whole server process tree across sleep/wake cycles (real on CPU too)."""

import pytest

from fixtures.judging.expect import reply_is
from fixtures.launching.external import needs_own_process
from fixtures.observing.device import tree_rss_bytes
from thresholds import judges

CYCLES = 10


@pytest.mark.behaviour("mechanism/host-rss-stable")
def test_host_rss_stable(engine, limits, measure, record_property):
    needs_own_process(engine.server)
    engine.complete("warm the allocator before measuring", 64)
    series = []
    for _ in range(CYCLES):
        reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
        reply_is(engine.control.wake_up(), 200, {"status": "awake"})
        engine.complete("one request per cycle", 16)
        series.append(tree_rss_bytes(engine.server.proc.pid))
    record_property("rss_bytes_per_cycle", series)
    measure(judges.host_rss_stable(series, limits))
