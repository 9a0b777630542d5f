"""Invalid query parameters are refused with 400 naming the parameter, state unchanged, and a
request streaming when the refusal lands runs on unchanged."""

import pytest

from fixtures.judging import with_work
from fixtures.judging.assertions import serving, state_is
from fixtures.judging.with_work import Call
from fixtures.observing.client import Reply
from fixtures.observing.engine import AWAKE_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
LEVELS = {"minus1": "-1", "3": "3", "abc": "abc"}


def refused_naming(engine, reply, param):
    body = reply.body if isinstance(reply.body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    if not engine.control.shape.route_validation and reply.path.startswith("/sleep"):
        # Before 0.32 /sleep validates nothing at the route: a refusal is judged on its status
        # class; naming the parameter is the reply shape of api/reply-bodies.
        assert reply.status == 400, f"expected 400; observed {reply.describe()}"
        return
    assert reply.status == 400 and error.get("param") == param, (
        f"expected 400 with error.param {param!r}; observed {reply.describe()}"
    )


def refused_with_400(reply: Reply) -> list[str]:
    return [] if reply.status == 400 else [f"expected 400; observed {reply.describe()}"]


@pytest.mark.behaviour("misuse/invalid-sleep-level")
@pytest.mark.topologies("single", "api2")
@pytest.mark.topology_params(level="with-work")
@pytest.mark.parametrize("level", [*LEVELS, "with-work"])
def test_invalid_sleep_level(topology_engine, topology, level):
    engine = topology_engine
    if level == "with-work":
        calls = [Call("POST", f"/sleep?level={v}") for v in LEVELS.values()]
        problems = with_work.streaming_problems(engine, topology, calls, refused_with_400)
        assert not problems, "; ".join(problems)
        return
    refused_naming(engine, engine.control.sleep(LEVELS[level]), "query.level")
    state_is(engine, AWAKE, f"after the refused /sleep?level={LEVELS[level]}")
    serving(engine)


@pytest.mark.behaviour("misuse/invalid-mode")
@pytest.mark.topologies("single", "api2")
@pytest.mark.topology_params(endpoint="with-work")
@pytest.mark.parametrize("endpoint", ["sleep", "pause", "with-work"])
def test_invalid_mode(topology_engine, topology, endpoint):
    engine = topology_engine
    if endpoint == "with-work":
        calls = [Call("POST", "/sleep?mode=foo"), Call("POST", "/pause?mode=foo")]
        problems = with_work.streaming_problems(engine, topology, calls, refused_with_400)
        assert not problems, "; ".join(problems)
        return
    call = engine.control.sleep if endpoint == "sleep" else engine.control.pause
    refused_naming(engine, call(mode="foo"), "query.mode")
    state_is(engine, AWAKE, f"after the refused /{endpoint}?mode=foo")
    serving(engine)
