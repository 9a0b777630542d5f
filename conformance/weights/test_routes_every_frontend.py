"""With several API servers, one weight-update session may be driven through any of them: its
calls reach the one engine whichever front-end takes them, and every front-end then reports
the committed version and serves the pushed checkpoint."""

import pytest

from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems, version_problems
from fixtures.observing import frontends
from fixtures.observing.weight_sync import layer_chunks, update_info

VERSION = "frontends-B"


def golden_tokens(front: frontends.Frontend) -> list[int]:
    reply = front.call("POST", "/v1/completions", {
        "model": front.server.config.served_model_name, "prompt": golden.HTTP_PROMPT,
        "max_tokens": golden.TOKENS, "temperature": 0.0, "ignore_eos": True, "return_token_ids": True})
    assert reply.status == 200, f"the golden prompt via API server pid {front.pid}: {reply.describe()}"
    return list(reply.body["choices"][0]["token_ids"])


@pytest.mark.behaviour("weights/routes-every-frontend")
@pytest.mark.topologies("api2")
def test_routes_every_frontend(goldens, checkpoints, topology_engine, topology_weights):
    e = topology_engine
    fronts = frontends.frontends(e.server, e.request_timeout, e.control.shape)
    first, last = fronts[0], fronts[-1]
    b = checkpoints["B"]
    reply_is(first.call("POST", "/pause?mode=keep"), 200, {"status": "paused"})
    steps = [(first, "/init_weight_transfer_engine", {"init_info": {"trainer": "conformance-suite"}}),
             (last, "/start_weight_update", None)]
    steps += [(fronts[i % len(fronts)], "/update_weights", {"update_info": update_info(b, chunk, 1)})
              for i, chunk in enumerate(layer_chunks(b.tensor_names()))]
    steps += [(first, "/finish_weight_update", {"weight_version": VERSION})]
    for front, route, body in steps:
        reply = front.call("POST", route, body)
        assert reply.status == 200, (
            f"{route} via API server pid {front.pid} was not accepted: {reply.describe()}")
    reply_is(last.call("POST", "/resume"), 200, {"status": "resumed"})
    problems = []
    for front in fronts:
        where = f"API server pid {front.pid}"
        info = front.call("GET", "/weight_info")
        reported = info.body.get("weight_version") if isinstance(info.body, dict) else info.describe()
        problems += version_problems({where: str(reported)}, VERSION, "after the session")
        problems += serves_problems({where: golden_tokens(front)}, "B", goldens, "after the session")
    assert not problems, "; ".join(problems)
