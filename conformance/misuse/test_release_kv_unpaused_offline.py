"""release_kv_cache_memory() through the Python API without a completed pause."""

import pytest

from fixtures.judging.offline_judges import UnpausedRelease, unpaused_release_problems

PROMPT = "A request after a KV-cache release that the engine had to refuse."
TOKENS = 48
AFTER_TIMEOUT_S = 30.0  # a 48-token request on an awake engine takes well under a second


@pytest.mark.behaviour("misuse/release-kv-needs-pause")
def test_release_kv_unpaused_offline(offline):
    expected = offline.reference(PROMPT, TOKENS)
    released = offline.call("release_kv_cache_memory")
    flags = offline.flags()
    obs = UnpausedRelease(released, flags, None, None, expected)
    if all(v is False for v in flags.values()):  # else a request would only wait: judged as is
        offline.add("after", PROMPT, TOKENS, kind="final_only")
        offline.collect({"after": "finished"}, timeout=AFTER_TIMEOUT_S)
        seen = offline.deliveries()["after"]
        obs.outputs_after, obs.error_after = list(seen.outputs), seen.error
    problems = unpaused_release_problems(obs)
    assert not problems, "; ".join(problems)
