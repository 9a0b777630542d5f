"""sleep(mode="wait") through the Python API drains in flight and leaves the queue queued."""

import pytest

from fixtures.judging.offline_custody import drain_problems, observe_drain

# The engine core in a process of its own: the drain is the engine's (0.32 refuses it in-process).
MP_ENGINES = ("LLM-MP1", "AsyncLLM-MP1", "AsyncLLM-MP0")


@pytest.mark.behaviour("custody/drain-before-offload")
@pytest.mark.offline_engines(*MP_ENGINES)
def test_drain_before_offload_offline(offline):
    obs = observe_drain(offline, kind="cumulative", waiting=True)
    problems = drain_problems(obs)
    assert not problems, "; ".join(problems) + f"; observed {obs.flight.summary()}"
