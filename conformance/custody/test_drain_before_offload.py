"""sleep(mode=wait): drain what is running, keep what is queued, then release memory."""

import threading

import pytest

from fixtures import judges
from fixtures.client import Reply, wait_until
from fixtures.custody import DRAIN_SETTLE_S
from fixtures.engine import AWAKE_GAUGE, HOLD_WINDOW_S, SLEEP_GAUGE
from fixtures.expect import reply_is

LATE_TOKENS = 48


@pytest.mark.behaviour("custody/drain-before-offload")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_drain_before_offload(engine, level):
    prompt = f"drained before offload {level}"
    size = engine.in_flight_tokens() // 2  # two share the engine: each runs about as long
    reference = engine.reference(prompt, size)
    late_prompt = f"queued during the drain {level}"
    late_reference = engine.reference(late_prompt, LATE_TOKENS)
    first, _ = engine.start_in_flight(prompt, size=size)
    second, _ = engine.start_in_flight(prompt, size=size)

    replies: list[Reply] = []
    sleeper = threading.Thread(target=lambda: replies.append(engine.control.sleep(level, "wait")))
    sleeper.start()
    assert wait_until(engine.control.is_paused, timeout=10), "the drain never paused the scheduler"
    late = engine.gen.start(late_prompt, LATE_TOKENS)
    # The frontend writes the gauge once the engine has released memory: not during the drain.
    gauge_during = engine.control.sleep_state()
    sleeper.join(engine.request_timeout)
    assert replies, "/sleep?mode=wait did not answer"
    reply_is(replies[0], 200, {"status": "sleeping", "level": level})

    problems = []
    if gauge_during != AWAKE_GAUGE and not (first.done.is_set() and second.done.is_set()):
        problems.append(f"gauge read {gauge_during} while requests were still draining")
    for name, gen in (("first", first), ("second", second)):
        if not gen.done.wait(DRAIN_SETTLE_S):
            problems.append(f"{name} in-flight request still running after /sleep answered")
        problems += [f"{name}: {p}" for p in judges.completed(gen, size, reference=reference)]
    if engine.control.sleep_state() != SLEEP_GAUGE[level]:
        problems.append(f"gauge after the sleep is {engine.control.sleep_state()}")
    if wait_until(late.done.is_set, HOLD_WINDOW_S):
        problems.append(f"request queued during the drain ran before the wake: {late.summary()}")
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    if not late.done.wait(engine.request_timeout):
        problems.append("queued request did not run after the wake")
    problems += [f"queued: {p}" for p in judges.completed(late, LATE_TOKENS, reference=late_reference)]
    assert not problems, "; ".join(problems)
