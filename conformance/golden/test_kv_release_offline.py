"""release_kv_cache_memory() after a completed pause, then a kv_cache wake, through the
Python API: the engine holds new work meanwhile and its greedy output is unchanged after."""

import time

import pytest

from fixtures.judging.offline_judges import KvRelease, kv_release_problems, release_accepted
from fixtures.observing.offline import OfflineClient
from fixtures.spec.profiles import PROFILES

PROMPT = "Greedy output across a KV-cache release and a kv_cache wake, through the Python API."
TOKENS = 48
FRESH_TIMEOUT_S = 30.0  # a 48-token request on an awake engine takes well under a second


def pause_for(offline: OfflineClient, sleep_requires_pause: bool) -> tuple[str, str, dict]:
    """The completed pause release_kv_cache_memory() needs, as each API offers it: AsyncLLM
    pause_generation; LLM sleep(level=0) (its docstring), or pause_generation (PR #53082) once
    sleep itself requires a pause (layered)."""
    if offline.engine.api == "AsyncLLM" or sleep_requires_pause:
        return "pause_generation(mode='keep')", "pause_generation", {"mode": "keep"}
    return "sleep(level=0)", "sleep", {"level": 0}


def _seen(offline: OfflineClient, rid: str) -> tuple[list[dict], str | None]:
    seen = offline.deliveries().get(rid)
    return (list(seen.outputs), seen.error) if seen else ([], None)


@pytest.mark.behaviour("golden/after-kv-release")
def test_after_kv_release_offline(offline, run_state, target, record_property):
    expected = offline.reference(PROMPT, TOKENS)
    label, method, kwargs = pause_for(offline, PROFILES[run_state.profile].sleep_requires_pause)
    paused = offline.call(method, **kwargs)
    obs = KvRelease(target.platform, paused, reference=expected)
    if paused.raised is None:
        obs.released = offline.call("release_kv_cache_memory")
        obs.flags_released = offline.flags()
        if obs.released.raised is not None and release_accepted(obs):  # CPU: no selective discard
            record_property("platform_note", f"cpu: {obs.released.describe()}; the recovery path "
                                             f"(kv_cache recorded asleep, then woken) is what runs")
        offline.phase("released")
        offline.add("held", PROMPT, TOKENS, kind="delta")
        began = time.monotonic()
        offline.collect({"held": "started"}, timeout=offline.hold_window(TOKENS))
        obs.window_s = time.monotonic() - began
        # Read before the wake is sent: whatever ran here ran on released memory.
        obs.progress_released = offline.progress("held")
        obs.outputs_released = _seen(offline, "held")[0]
        obs.woke = offline.call("wake_up", then="awake", tags=["kv_cache"])
        obs.flags_woken = offline.flags()
        offline.collect({"held": "finished"}, timeout=FRESH_TIMEOUT_S)
        obs.held_outputs, obs.held_error = _seen(offline, "held")
        if all(v is False for v in obs.flags_woken.values()):
            offline.add("fresh", PROMPT, TOKENS, kind="final_only")
            offline.collect({"fresh": "finished"}, timeout=FRESH_TIMEOUT_S)
            obs.fresh_outputs, obs.fresh_error = _seen(offline, "fresh")
    problems = kv_release_problems(obs, label)
    assert not problems, "; ".join(problems)
