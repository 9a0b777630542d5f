"""Custody of requests in flight through /sleep?mode=..., at every level."""

import pytest

from fixtures.judging import custody
from fixtures.observing.engine import IN_FLIGHT_PROMPT
from fixtures.spec.profiles import MODES


@pytest.mark.behaviour("custody/sleep-in-flight")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("level", [0, 1, 2], ids=lambda v: f"level{v}")
def test_sleep_in_flight(engine, level, mode):
    """At levels 1 and 2 sleep clears the prefix cache, which preempts a kept request: it is
    recomputed after the wake, so its ids are compared only at level 0."""
    prompt = IN_FLIGHT_PROMPT
    size = engine.in_flight_tokens()
    exact = mode == "wait" or (mode == "keep" and level == 0)
    reference = engine.reference(prompt, size) if exact else None
    gen, size = engine.start_in_flight(prompt, size=size)

    def sleep():
        return engine.control.sleep(level, mode)

    problems = custody.fate_problems(engine, mode, gen, size, sleep,
                                     {"status": "sleeping", "level": level}, engine.control.wake_up,
                                     reference)
    assert not problems, f"/sleep?level={level}&mode={mode}: " + "; ".join(problems)
