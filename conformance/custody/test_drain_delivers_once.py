"""Outputs buffered while sleep(mode="wait") drains reach the caller exactly once, per kind."""

import pytest

from fixtures.judging import delivery
from fixtures.judging.offline_judges import return_problems
from fixtures.protocol.drain import observe_drain

MP_ENGINES = ("LLM-MP1", "AsyncLLM-MP1", "AsyncLLM-MP0")


@pytest.mark.behaviour("custody/drain-delivers-once")
@pytest.mark.offline_engines(*MP_ENGINES)
@pytest.mark.parametrize("kind", ["cumulative", "delta", "final_only"])
def test_drain_delivers_once(offline, kind, record_property):
    obs = observe_drain(offline, kind=kind, waiting=False, hold=offline.engine.api == "AsyncLLM")
    outputs = obs.flight.outputs
    # How much the API had to buffer: outputs the caller received after the drain began.
    record_property("outputs_after_drain", sum(1 for o in outputs if o["phase"] != "awake"))
    problems = return_problems(obs.slept)
    problems += delivery.exactly_once_problems(kind, outputs, obs.reference)
    assert not problems, "; ".join(problems) + f"; observed {obs.flight.summary()}"
