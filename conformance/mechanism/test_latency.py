"""Sleep, wake, staged wake and cycle latency: medians, from the server and from the client."""

import time

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.observing import metrics
from thresholds import judges

REPEATS = 5


def timed(engine, call, expected, operation):
    """(client seconds, server seconds from the histogram's sum delta) for one call; a missing
    or unmoved histogram fails (judges.histogram_seconds), it never reads as 0 s."""
    before = metrics.sleep_op_histogram(engine.control.metrics_text(), operation)
    began = time.monotonic()
    reply_is(call(), 200, expected)
    client = time.monotonic() - began
    after = metrics.sleep_op_histogram(engine.control.metrics_text(), operation)
    server = judges.histogram_seconds(before, after, metrics.SLEEP_OP_DURATION, operation)
    return client, server


@pytest.mark.behaviour("mechanism/latency")
def test_latency(engine, limits, measure, record_property):
    client = {"sleep": [], "wake": [], "staged_wake": [], "cycle": []}
    server = {"sleep": [], "wake": [], "staged_wake": [], "cycle": []}
    for _ in range(REPEATS):
        c_sleep, s_sleep = timed(engine, lambda: engine.control.sleep(1),
                                 {"status": "sleeping"}, "sleep")
        c_wake, s_wake = timed(engine, lambda: engine.control.wake_up(), {"status": "awake"}, "wake")
        reply_is(engine.control.sleep(1), 200, {"status": "sleeping"})
        c_w, s_w = timed(engine, lambda: engine.control.wake_up(["weights"]), {"status": "sleeping"}, "wake")
        c_k, s_k = timed(engine, lambda: engine.control.wake_up(["kv_cache"]), {"status": "awake"}, "wake")
        for table, values in ((client, (c_sleep, c_wake, c_w + c_k)), (server, (s_sleep, s_wake, s_w + s_k))):
            table["sleep"].append(values[0])
            table["wake"].append(values[1])
            table["staged_wake"].append(values[2])
            table["cycle"].append(values[0] + values[1])
    record_property("latency_client_seconds", client)
    record_property("latency_server_seconds", server)
    measure(judges.latency(server, limits, "server") + judges.latency(client, limits, "client"))
