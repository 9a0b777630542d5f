"""Invalid query parameters are refused with 400 naming the parameter, state unchanged."""

import pytest

from fixtures.judging.assertions import serving, state_is
from fixtures.observing.engine import AWAKE_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)


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


@pytest.mark.behaviour("misuse/invalid-sleep-level")
@pytest.mark.parametrize("level", ["-1", "3", "abc"], ids=["minus1", "3", "abc"])
def test_invalid_sleep_level(engine, level):
    refused_naming(engine, engine.control.sleep(level), "query.level")
    state_is(engine, AWAKE, f"after the refused /sleep?level={level}")
    serving(engine)


@pytest.mark.behaviour("misuse/invalid-mode")
@pytest.mark.parametrize("endpoint", ["sleep", "pause"])
def test_invalid_mode(engine, endpoint):
    call = engine.control.sleep if endpoint == "sleep" else engine.control.pause
    refused_naming(engine, call(mode="foo"), "query.mode")
    state_is(engine, AWAKE, f"after the refused /{endpoint}?mode=foo")
    serving(engine)
