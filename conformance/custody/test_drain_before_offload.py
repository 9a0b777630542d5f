"""sleep(mode=wait): drain what is running, keep what is queued, then release memory."""

import threading
import time

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import reply_is
from fixtures.judging.custody import DRAIN_SETTLE_S
from fixtures.observing.client import ControlPlane, Reply, wait_until
from fixtures.observing.engine import AWAKE_GAUGE, IN_FLIGHT_PROMPT, SLEEP_GAUGE

LATE_TOKENS = 48
GAUGE_POLL_S = 0.05


def sample_gauge(control: ControlPlane, sleeper: threading.Thread,
                 readings: list[judges.GaugeReading], errors: list[BaseException]) -> None:
    """Read the sleep-state gauge over and over while /sleep?mode=wait is outstanding."""
    try:
        while sleeper.is_alive():
            sent = time.monotonic()
            gauge = control.sleep_state()
            readings.append(judges.GaugeReading(sent, time.monotonic(), gauge))
            time.sleep(GAUGE_POLL_S)
    except BaseException as exc:  # re-raised by the test thread
        errors.append(exc)


@pytest.mark.behaviour("custody/drain-before-offload")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_drain_before_offload(engine, level):
    prompt = IN_FLIGHT_PROMPT
    size = engine.in_flight_tokens() // 2  # two share the engine: each runs about as long
    reference = engine.reference(prompt, size)
    late_prompt = "queued during the drain"
    late_reference = engine.reference(late_prompt, LATE_TOKENS)
    first, _ = engine.start_in_flight(prompt, size=size)
    second, _ = engine.start_in_flight(prompt, size=size)

    replies: list[Reply] = []
    sleeper = threading.Thread(target=lambda: replies.append(engine.control.sleep(level, "wait")))
    # A control plane of its own: the poller reads /metrics while the test thread polls flags.
    poller_control = ControlPlane(engine.control.base_url, engine.control.timeout,
                                  engine.server.ensure_alive, engine.control.shape)
    readings: list[judges.GaugeReading] = []
    poll_errors: list[BaseException] = []
    poller = threading.Thread(target=sample_gauge, args=(poller_control, sleeper, readings, poll_errors),
                              daemon=True)
    sleeper.start()
    poller.start()
    assert wait_until(engine.control.is_paused, timeout=10), "the drain never paused the scheduler"
    late = engine.gen.start(late_prompt, LATE_TOKENS)
    sleeper.join(engine.request_timeout)
    poller.join(engine.request_timeout)
    if poll_errors:
        raise poll_errors[0]
    assert replies, "/sleep?mode=wait did not answer"
    reply_is(replies[0], 200, {"status": "sleeping", "level": level})

    in_flight = []
    for name, gen in (("first", first), ("second", second)):
        if not gen.done.wait(DRAIN_SETTLE_S):
            in_flight.append(f"{name} in-flight request still running after /sleep answered")
        in_flight += [f"{name}: {p}" for p in judges.completion_problems(gen, size, reference=reference)]
    # The frontend writes the gauge once the engine has released memory: not during the drain.
    ends = [first.ended, second.ended]
    drained_at = None if None in ends else max(e for e in ends if e is not None)
    problems = judges.drain_gauge_problems(readings, drained_at, AWAKE_GAUGE,
                                           require_sample=not in_flight)
    problems += in_flight
    asleep_gauge = engine.control.sleep_state()
    if asleep_gauge != SLEEP_GAUGE[level]:
        problems.append(f"gauge after the sleep: expected {SLEEP_GAUGE[level]}; observed {asleep_gauge}")
    if wait_until(late.done.is_set, engine.hold_window(LATE_TOKENS)):
        problems.append(f"request queued during the drain ran before the wake: {late.summary()}")
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    if not late.done.wait(engine.request_timeout):
        problems.append("queued request did not run after the wake")
    problems += [f"queued: {p}"
                 for p in judges.completion_problems(late, LATE_TOKENS, reference=late_reference)]
    assert not problems, "; ".join(problems)
