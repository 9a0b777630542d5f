"""/release_kv_cache_memory out of order: refused, nothing released, output unchanged, and the
requests streaming or held when the refusal lands left as they were."""

from __future__ import annotations

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges, with_work
from fixtures.judging.assertions import reply_is, state_is
from fixtures.judging.with_work import Call, refused
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView
from fixtures.spec.profiles import PROFILES

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
PROMPT = "release the kv cache out of order"
TOKENS = 24
# The precondition each refusal must name (vLLM 0.32/0.33 EngineCore.release_kv_cache_memory:
# "requires a completed pause first" / "requires all executor memory to be resident").
NEEDS = {"awake": "completed pause", "asleep": "resident"}


@pytest.mark.behaviour("misuse/release-kv-out-of-order")
@pytest.mark.topologies("single", "dp2", "api2")
# Beyond one engine: a request streaming on each engine, the refusal through every API server.
@pytest.mark.topology_params(state="streaming")
@pytest.mark.parametrize("state", ["awake", "asleep", "streaming", "held"])
def test_release_kv_out_of_order(topology_engine, topology, state):
    engine = topology_engine
    if state in ("streaming", "held"):
        # With work: whatever status the refusal takes (awake and asleep judge it), it MUST
        # leave a request streaming (awake) or held (asleep: kept and arrived) as it found them.
        release = Call("POST", "/release_kv_cache_memory")
        if state == "streaming":
            problems = with_work.streaming_problems(engine, topology, [release], refused(NEEDS["awake"]))
        else:
            held = with_work.hold(engine, topology, Call("POST", "/sleep?level=1&mode=keep"))
            problems = with_work.repeat_problems(engine, topology, held, [release], refused(NEEDS["asleep"]),
                                                 flags=(True, True))
            problems += with_work.still_held_problems(held, "the refused release while asleep")
            problems += with_work.released_problems(engine, held, Call("POST", "/wake_up"))
        assert not problems, "; ".join(problems)
        return
    before = engine.complete(PROMPT, TOKENS)
    if judges.completion_problems(before, TOKENS):
        raise HarnessError(f"the greedy run before the release failed: {before.summary()}")
    expected = AWAKE
    if state == "asleep":
        if PROFILES[engine.profile].sleep_requires_pause:
            reply_is(engine.control.pause("abort"), 200, {"status": "paused"})
        reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
        expected = StateView(is_sleeping=True, is_paused=True, gauge=SLEEP_GAUGE[1])

    problems = judges.release_refusal_problems(engine.control.release_kv_cache_memory(), NEEDS[state])
    assert not problems, f"/release_kv_cache_memory while {state}: " + "; ".join(problems)
    state_is(engine, expected, f"after the refused release while {state}")
    if state == "asleep":
        reply_is(engine.control.wake_up(), 200, {"status": "awake"})
        state_is(engine, AWAKE, "after the full wake")
    after = engine.complete(PROMPT, TOKENS)
    problems = judges.completion_problems(after, TOKENS, reference=before.token_ids)
    assert not problems, "greedy output after the refused release: " + "; ".join(problems)
