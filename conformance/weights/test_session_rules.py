"""Session rules: a chunk before start, a finish without start and a second start are each
refused as the caller's error, and the engine goes on serving the weights it had (and a
session opened before a refused second start still completes)."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.judging.weight_judges import refused_problems
from fixtures.observing.weight_sync import layer_chunks, update_info

CASES = ["chunk-before-start", "finish-without-start", "start-twice"]


@pytest.mark.behaviour("weights/session-rules")
# IDs of one word each (a finding's scope matches the dash-separated words of an instance ID).
@pytest.mark.parametrize("case", CASES, ids=[c.replace("-", "_") for c in CASES])
def test_session_rules(goldens, checkpoints, engine, weights, case):
    b = checkpoints["B"]
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    assert weights.init().status == 200, "init_weight_transfer_engine was not accepted"
    if case == "chunk-before-start":
        reply = weights.update(update_info(b, layer_chunks(b.tensor_names())[0], 1))
        problems = refused_problems(reply.status, reply.body, f"{case}: /update_weights",
                                    "start_weight_update")
        expected = "A"
    elif case == "finish-without-start":
        reply = weights.finish("never-started")
        problems = refused_problems(reply.status, reply.body, f"{case}: /finish_weight_update",
                                    "start_weight_update")
        expected = "A"
    else:
        assert weights.start().status == 200, "the first start_weight_update was not accepted"
        reply = weights.start()
        problems = refused_problems(reply.status, reply.body,
                                    f"{case}: the second /start_weight_update", "active")
        for chunk in layer_chunks(b.tensor_names()):  # the first session goes on
            assert weights.update(update_info(b, chunk, 1)).status == 200, (
                f"{case}: a chunk of the session opened before the refused start was not accepted")
        assert weights.finish("B").status == 200, f"{case}: the first session's finish was not accepted"
        expected = "B"
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    assert_serves(engine, 1, expected, goldens, f"after {case}")
    assert not problems, "; ".join(problems)
