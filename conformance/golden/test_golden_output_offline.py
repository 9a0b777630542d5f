"""Greedy output through the Python API after every kind of wake equals the output before."""

import pytest

from fixtures.judging import golden
from fixtures.judging.delivery import first_difference
from fixtures.judging.offline_judges import return_problems

SCENARIOS = ["level1-full-wake", "staged-weights-first", "staged-kv-first", "level2-reload-weights"]


@pytest.mark.behaviour("golden/after-wake")
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_after_wake_offline(offline, scenario, limits, target, record_property):
    # Captured at the first attach to the host, before any lifecycle call (fixtures/judging/golden.py).
    reference = golden.pristine_run(offline.server.facts)
    problems: list[str] = []
    if scenario == "level1-full-wake":
        problems += return_problems(offline.call("sleep", level=1))
        problems += return_problems(offline.call("wake_up"), True)
    elif scenario.startswith("staged"):
        order = ("weights", "kv_cache") if scenario == "staged-weights-first" else ("kv_cache", "weights")
        problems += return_problems(offline.call("sleep", level=1))
        problems += return_problems(offline.call("wake_up", tags=[order[0]]), False)
        problems += return_problems(offline.call("wake_up", tags=[order[1]]), True)
    else:
        problems += return_problems(offline.call("sleep", level=2))
        problems += return_problems(offline.call("wake_up", tags=["weights"]), False)
        problems += return_problems(offline.call("collective_rpc", method="reload_weights"))
        problems += return_problems(offline.call("wake_up", tags=["kv_cache"]), True)
        if target.platform == "cpu":
            record_property("platform_note", "cpu: level-2 sleep is a no-op; reload not exercised")
    assert not problems, "; ".join(problems)
    now = golden.capture_offline(offline, f"after-{scenario}")
    first = first_difference(now.token_ids, reference.token_ids)
    if first is not None:
        pytest.fail(f"after {scenario}: token ids differ from the golden run at position {first}")
    message = limits["golden/after-wake:max_abs_logprob_diff"].check(golden.max_logprob_drift(now, reference))
    assert not message, f"after {scenario}: {message}"
