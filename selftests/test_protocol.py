"""The lifecycle protocol (fixtures/protocol/): each transport's capabilities, the skip a test
gets for one its transport lacks, and the judges that read each transport's records."""

from __future__ import annotations

import pytest

from fixtures.axes.offline_engines import BY_NAME
from fixtures.judging.protocol_judges import answer_problems, state_problems
from fixtures.observing.client import Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE
from fixtures.observing.offline import Called
from fixtures.protocol.capabilities import DEEP_DRAIN, GAUGE, PAUSE, python_api_missing
from fixtures.protocol.parts import Answer, Lifecycle, State


def test_each_python_api_engine_declares_what_it_lacks():
    assert set(python_api_missing(BY_NAME["AsyncLLM-MP0"])) == {GAUGE, DEEP_DRAIN}
    assert set(python_api_missing(BY_NAME["LLM-MP1"])) == {GAUGE, PAUSE, DEEP_DRAIN}
    assert set(python_api_missing(BY_NAME["LLM-MP0"])) == {GAUGE, PAUSE, DEEP_DRAIN}


def test_a_missing_capability_skips_with_the_transports_reason():
    lifecycle = Lifecycle("offline", None, None, {PAUSE: "no pause here"},  # type: ignore[arg-type]
                          output=None, generate=None, drain=None)  # type: ignore[arg-type]
    lifecycle.require(GAUGE)
    with pytest.raises(pytest.skip.Exception, match="offline lacks pause: no pause here"):
        lifecycle.require(PAUSE)


def test_a_wake_is_judged_by_its_body_over_http_and_its_value_through_the_api():
    sleeping = Reply("POST", "/wake_up?tags=weights", 200, {"status": "sleeping", "tags": ["weights"]}, 0.0)
    assert answer_problems(Answer("wake_up", {"tags": ["weights"]}, sleeping), awake=False) == []
    assert answer_problems(Answer("wake_up", {"tags": ["weights"]}, sleeping), awake=True) == [
        "expected 200 {'status': 'awake', 'tags': ['weights']}; observed " + sleeping.describe()]
    paused = Reply("POST", "/pause?mode=keep", 200, {"status": "paused"}, 0.0)
    assert answer_problems(Answer("pause", {"mode": "keep"}, paused)) == []  # the mode is not echoed
    woke = Called("wake_up", True)
    assert answer_problems(Answer("wake_up", {}, woke), awake=True) == []
    assert answer_problems(Answer("wake_up", {}, woke), awake=False) != []
    assert answer_problems(Answer("sleep", {"level": 1}, Called("sleep", None))) == []


def test_the_gauge_is_judged_only_where_the_transport_reads_it():
    flags = {"is_sleeping": True, "is_paused": True}
    assert state_problems(State(flags, SLEEP_GAUGE[1], True), True, SLEEP_GAUGE[1], "c") == []
    assert state_problems(State(flags, AWAKE_GAUGE, True), True, SLEEP_GAUGE[1], "c") == [
        "c: expected is_sleeping=True is_paused=True gauge=(0.0, 1.0, 0.0); "
        "observed is_sleeping=True is_paused=True gauge=(1.0, 0.0, 0.0)"]
    assert state_problems(State(flags, None, False), True, SLEEP_GAUGE[1], "c") == []
    assert state_problems(State({"is_sleeping": False}, None, False), True, SLEEP_GAUGE[1], "c") != []
