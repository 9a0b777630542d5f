"""A sleep, a kv_cache-only wake, a second sleep at another level, a full wake."""

from __future__ import annotations

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging.assertions import reply_is, state_is
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView
from fixtures.spec.profiles import PROFILES

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
PROMPT = "sleep, wake the kv cache, sleep again"
TOKENS = 24


def asleep(level: int) -> StateView:
    return StateView(is_sleeping=True, is_paused=True, gauge=SLEEP_GAUGE[level])


@pytest.mark.behaviour("flags/resleep-after-partial-wake")
@pytest.mark.parametrize("second", [0, 1, 2], ids=lambda v: f"then-level{v}")
def test_resleep_after_partial_wake(engine, second):
    before = engine.complete(PROMPT, TOKENS)
    if judges.completion_problems(before, TOKENS):
        raise HarnessError(f"the greedy run before the sleep failed: {before.summary()}")
    if PROFILES[engine.profile].sleep_requires_pause:
        reply_is(engine.control.pause("abort"), 200, {"status": "paused"})
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    state_is(engine, asleep(1), "after /sleep?level=1")
    reply_is(engine.control.wake_up(["kv_cache"]), 200, {"status": "sleeping", "tags": ["kv_cache"]})
    state_is(engine, asleep(1), "after /wake_up?tags=kv_cache (weights still asleep)")
    reply_is(engine.control.sleep(second), 200, {"status": "sleeping", "level": second})
    state_is(engine, asleep(second), f"after the second sleep, /sleep?level={second}")
    reply_is(engine.control.wake_up(), 200, {"status": "awake", "tags": None})
    state_is(engine, AWAKE, "after the full wake")
    after = engine.complete(PROMPT, TOKENS)
    problems = judges.completion_problems(after, TOKENS, reference=before.token_ids)
    assert not problems, f"greedy output after sleep 1, kv_cache wake, sleep {second}, full wake: " + (
        "; ".join(problems))
