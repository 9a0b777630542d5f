"""Greedy output through the Python API after every kind of wake equals the output before."""

import pytest

from fixtures.offline import OfflineClient, returned, run_to_end

PROMPT = "golden output across sleep and wake, read through the offline Python API"
TOKENS = 64
LOGPROBS = 1
SCENARIOS = ["level1-full-wake", "staged-weights-first", "staged-kv-first", "level2-reload-weights"]


def capture(offline: OfflineClient, rid: str) -> dict:
    out = run_to_end(offline, rid, PROMPT, TOKENS, logprobs=LOGPROBS).outputs[-1]
    assert out["logprobs"] is not None and len(out["token_ids"]) == TOKENS, f"capture failed: {out}"
    return out


def golden(offline: OfflineClient) -> dict:
    """Captured once per engine, awake, before any test of this module sleeps it."""
    if "golden" not in offline.server.facts:
        offline.server.facts["golden"] = capture(offline, "golden")
    return offline.server.facts["golden"]


@pytest.mark.behaviour("golden/after-wake")
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_after_wake_offline(offline, scenario, limits, target, record_property):
    reference = golden(offline)
    problems: list[str] = []
    if scenario == "level1-full-wake":
        problems += returned(offline.call("sleep", level=1))
        problems += returned(offline.call("wake_up"), True)
    elif scenario.startswith("staged"):
        order = ("weights", "kv_cache") if scenario == "staged-weights-first" else ("kv_cache", "weights")
        problems += returned(offline.call("sleep", level=1))
        problems += returned(offline.call("wake_up", tags=[order[0]]), False)
        problems += returned(offline.call("wake_up", tags=[order[1]]), True)
    else:
        problems += returned(offline.call("sleep", level=2))
        problems += returned(offline.call("wake_up", tags=["weights"]), False)
        problems += returned(offline.call("collective_rpc", method="reload_weights"))
        problems += returned(offline.call("wake_up", tags=["kv_cache"]), True)
        if target.platform == "cpu":
            record_property("platform_note", "cpu: level-2 sleep is a no-op; reload not exercised")
    assert not problems, "; ".join(problems)
    now = capture(offline, f"after-{scenario}")
    if now["token_ids"] != reference["token_ids"]:
        first = next(i for i, (a, b) in enumerate(zip(now["token_ids"], reference["token_ids"],
                                                      strict=True)) if a != b)
        pytest.fail(f"after {scenario}: token ids differ from the golden run at position {first}")
    drift = max((abs(a - b) for a, b in zip(now["logprobs"], reference["logprobs"], strict=True)),
                default=0.0)
    message = limits["golden/after-wake:max_abs_logprob_diff"].check(drift)
    assert not message, f"after {scenario}: {message}"
