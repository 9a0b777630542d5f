"""The sleep-mode operation metrics count every /sleep, /wake_up and /release_kv_cache_memory
the route runs (a release the engine refuses too), and nothing for a /sleep refused by
validation or a state query; no operation is left in flight, no total counter is exported, and
http_requests_total counts each call under its route, method and status class."""

from __future__ import annotations

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.observing import metrics

OPERATIONS = ("sleep", "wake", "release_kv_cache_memory")
NOTHING = {op: 0.0 for op in OPERATIONS}
# The duration histogram's _count is the count; a separate total counter is not part of the API.
NO_TOTAL = "sleep_mode_operations_total"


def request_count(text: str, route: tuple[str, str, str]) -> float:
    """http_requests_total for one (handler, method, status class); 0 when absent."""
    handler, method, status = route
    hits = metrics.find(text, "http_requests_total", handler=handler, method=method, status=status)
    return hits[0].value if hits else 0.0


def count_problems(before: str, after: str, expected: dict[str, float], context: str,
                   requests: dict[tuple[str, str, str], float] | None = None) -> list[str]:
    """Observations added per operation between two /metrics texts, nothing left in flight, and
    (where given) each route's calls counted by http_requests_total."""
    seen = {op: metrics.sleep_op_count(after, op) - metrics.sleep_op_count(before, op) for op in OPERATIONS}
    problems = []
    if seen != expected:
        problems.append(f"{context}: expected observation deltas {expected}; observed {seen}")
    counted = {route: request_count(after, route) - request_count(before, route) for route in requests or {}}
    if requests and counted != requests:
        problems.append(f"{context}: expected http_requests_total deltas (handler, method, status) "
                        f"{requests}; observed {counted}")
    in_flight = {op: metrics.sleep_ops_in_flight(after, op) for op in OPERATIONS}
    # An operation never observed on this server may have no in-flight series yet.
    settled = {op: v == 0.0 or (v is None and metrics.sleep_op_count(after, op) == 0)
               for op, v in in_flight.items()}
    if not all(settled.values()):
        problems.append(f"{context}: expected no operation in flight after the calls answered; "
                        f"observed {in_flight}")
    totals = sorted({s.name for s in metrics.samples(after) if NO_TOTAL in s.name})
    if totals:
        problems.append(f"{context}: /metrics exports {totals}, expected no {NO_TOTAL} series")
    return problems


@pytest.mark.behaviour("metrics/sleep-ops-counted")
@pytest.mark.parametrize("refused", ["level=3", "mode=foo"])
def test_sleep_and_wake_are_counted(engine, refused):
    # The engine fixture's own wake_up has registered the series already; compare deltas.
    before = engine.control.metrics_text()
    name, value = refused.split("=")
    reply = engine.control.sleep(**{name: value})
    assert reply.status == 400, (
        f"expected /sleep?{refused} to be refused with 400; observed {reply.describe()}")
    engine.control.is_sleeping()
    after_refused = engine.control.metrics_text()
    problems = count_problems(before, after_refused, NOTHING,
                              f"after the refused /sleep?{refused} and GET /is_sleeping",
                              {("/sleep", "POST", "4xx"): 1.0, ("/is_sleeping", "GET", "2xx"): 1.0})

    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    reply_is(engine.control.wake_up(["kv_cache"]), 200, {"status": "awake"})
    after_cycle = engine.control.metrics_text()
    problems += count_problems(after_refused, after_cycle, {**NOTHING, "sleep": 1.0, "wake": 2.0},
                               "after one /sleep and two /wake_up",
                               {("/sleep", "POST", "2xx"): 1.0, ("/wake_up", "POST", "2xx"): 2.0})

    # Without a completed pause the engine refuses the release; the route still ran and is counted.
    release = engine.control.release_kv_cache_memory()
    assert release.status != 200, f"a release with no completed pause was accepted: {release.describe()}"
    status = f"{release.status // 100}xx"
    problems += count_problems(after_cycle, engine.control.metrics_text(),
                               {**NOTHING, "release_kv_cache_memory": 1.0},
                               "after a /release_kv_cache_memory the engine refused",
                               {("/release_kv_cache_memory", "POST", status): 1.0})
    assert not problems, "; ".join(problems)
