"""The sleep-mode operation metrics count every /sleep and /wake_up call."""

import pytest

from fixtures import metrics
from fixtures.expect import reply_is


@pytest.mark.behaviour("metrics/sleep-ops-counted")
def test_sleep_and_wake_are_counted(engine):
    # The engine fixture's own wake_up has registered the series already; compare deltas.
    before = engine.control.metrics_text()
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    reply_is(engine.control.wake_up(["kv_cache"]), 200, {"status": "awake"})
    after = engine.control.metrics_text()
    seen = {
        op: metrics.sleep_op_count(after, op) - metrics.sleep_op_count(before, op)
        for op in ("sleep", "wake")
    }
    assert seen == {"sleep": 1.0, "wake": 2.0}, (
        f"expected one 'sleep' and two 'wake' observations; observed deltas {seen}"
    )
    in_flight = {op: metrics.sleep_ops_in_flight(after, op) for op in ("sleep", "wake")}
    assert in_flight == {"sleep": 0.0, "wake": 0.0}, (
        f"expected no operation in flight after the calls answered; observed {in_flight}"
    )
