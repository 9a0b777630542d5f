"""Custody of requests in flight across /pause and /resume, per mode."""

import pytest

from fixtures.judging import custody
from fixtures.observing.engine import IN_FLIGHT_PROMPT
from fixtures.spec.profiles import MODES


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("mode", [*MODES, "keep-recompute"])
def test_pause_in_flight(engine, mode, stream, api):
    """keep holds the KV (clear_cache=false): output must equal the uninterrupted run exactly.
    keep-recompute uses /pause's default clear_cache=true: the request is preempted and
    recomputed, so it must finish in full, but its ids may take another numeric path."""
    prompt = IN_FLIGHT_PROMPT
    size = engine.in_flight_tokens()
    reference = engine.reference(prompt, size, api) if mode in ("wait", "keep") else None
    gen, size = engine.start_in_flight(prompt, stream=stream, api=api, size=size)

    def pause():
        if mode == "keep":
            return engine.control.pause("keep", clear_cache=False)
        return engine.control.pause(mode.removesuffix("-recompute"))

    problems = custody.fate_problems(engine, mode.removesuffix("-recompute"), gen, size, pause,
                                     {"status": "paused"}, engine.control.resume, reference)
    assert not problems, f"/pause?mode={mode}: " + "; ".join(problems)
