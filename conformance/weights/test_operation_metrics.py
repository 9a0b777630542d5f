"""Weight-operation metrics: one duration observation per accepted operation, none for a body
refused by validation (missing, mistyped or not an object), and no operation left in flight."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import operation_count_problems
from fixtures.observing import metrics

DURATION = "vllm:rl_weight_update_operation_duration_seconds_count"
IN_FLIGHT = "vllm:rl_weight_update_operations_in_flight"
JSON = {"Content-Type": "application/json"}
# Bodies validation must refuse before the engine (JSON texts, so `null` goes out as such).
REFUSED = {
    "/init_weight_transfer_engine": ("{}", '{"init_info": []}', '{"init_info": 1}', "[]", "1", '"x"', "null"),
    "/update_weights": ("{}", '{"update_info": 1}', '{"update_info": [1, 2]}', '{"update_info": "x"}',
                        "[]", "1", '"x"', "null"),
}


def counts(engine) -> dict[str, float]:
    found = metrics.find(engine.control.metrics_text(), DURATION)
    return {s.labels.get("operation", ""): s.value for s in found}


@pytest.mark.behaviour("weights/operation-metrics")
def test_operation_metrics(goldens, checkpoints, engine, weights):
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    before = counts(engine)
    already = len(weights.calls)
    weights.push(checkpoints["A"], "metrics-A")
    # A body refused by validation never reaches an operation.
    not_refused = []
    for route, bodies in REFUSED.items():
        for body in bodies:
            reply = engine.control.call("POST", route, data=body, headers=JSON)
            if not 400 <= reply.status < 500:
                not_refused.append(f"{route} {body}: {reply.describe()}")
    assert not not_refused, "bodies validation must refuse with a 4xx were not: " + "; ".join(not_refused)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    after = counts(engine)
    routes = {"/init_weight_transfer_engine": "init", "/start_weight_update": "start",
              "/update_weights": "update", "/finish_weight_update": "finish"}
    accepted: dict[str, int] = {}
    for call in weights.calls[already:]:
        if call.ok and call.route in routes:
            accepted[routes[call.route]] = accepted.get(routes[call.route], 0) + 1
    problems = operation_count_problems(before, after, accepted)
    left = [s for s in metrics.find(engine.control.metrics_text(), IN_FLIGHT) if s.value != 0]
    problems += [f"{IN_FLIGHT}{{operation={s.labels.get('operation')}}} = {s.value:g} after every call "
                 f"returned" for s in left]
    assert not problems, "; ".join(problems)
