"""Greedy output after every kind of wake equals the output captured before the sleep: one test
over the lifecycle protocol, over HTTP (on the seeded server) and through the Python API."""

import pytest

from fixtures.judging.golden import drift_problems
from fixtures.judging.protocol_judges import answer_problems
from fixtures.protocol.parts import ControlPart

STAGED_CYCLES = 5
SCENARIOS = ["level1-full-wake", "staged-weights-first", "staged-kv-first",
             "five-staged-cycles", "level2-reload-weights"]


def staged(control: ControlPart, first: str, second: str) -> list[str]:
    problems = answer_problems(control.sleep(1))
    problems += answer_problems(control.wake_up([first]), awake=False)
    return problems + answer_problems(control.wake_up([second]), awake=True)


@pytest.mark.behaviour("golden/after-wake")
@pytest.mark.seeded
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_golden_after_wake(lifecycle, scenario, limits, target, record_property):
    if scenario == "five-staged-cycles" and lifecycle.transport != "http":
        pytest.skip("golden/after-wake asks for five staged cycles over HTTP only (its catalog MUST)")
    control, output = lifecycle.control, lifecycle.output
    limit = limits["golden/after-wake:max_abs_logprob_diff"]
    # Captured at the first attach to the engine, before any lifecycle call (fixtures/protocol/output.py).
    reference = output.pristine()
    if scenario == "five-staged-cycles":
        drift: list[str] = []
        for cycle in range(1, STAGED_CYCLES + 1):
            problems = staged(control, "weights", "kv_cache")
            assert not problems, f"staged cycle {cycle}: " + "; ".join(problems)
            drift += drift_problems(output.golden(), reference, limit, f"after staged cycle {cycle}")
        assert not drift, "; ".join(drift)
        return
    if scenario == "level1-full-wake":
        problems = answer_problems(control.sleep(1)) + answer_problems(control.wake_up(), awake=True)
    elif scenario.startswith("staged"):
        problems = staged(control, *(("weights", "kv_cache") if scenario == "staged-weights-first"
                                     else ("kv_cache", "weights")))
    else:
        problems = answer_problems(control.sleep(2))
        problems += answer_problems(control.wake_up(["weights"]), awake=False)
        problems += answer_problems(output.reload_weights())
        problems += answer_problems(control.wake_up(["kv_cache"]), awake=True)
        if target.platform == "cpu":
            # Level 2 discards nothing on CPU: the reload restores what was never lost.
            record_property("platform_note", "cpu: level-2 sleep is a no-op; reload not exercised")
    assert not problems, "; ".join(problems)
    drift = drift_problems(output.golden(), reference, limit, f"after {scenario}")
    assert not drift, "; ".join(drift)
