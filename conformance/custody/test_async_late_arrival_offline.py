"""A request submitted through AsyncLLM while pause_generation(mode) is in force: held or
refused, per contract profile."""

import time

import pytest

from fixtures.judging.offline_judges import LateArrival, late_arrival_problems
from fixtures.observing.offline import OfflineClient
from fixtures.spec.profiles import MODES, PROFILES

PROMPT = "A request that reaches AsyncLLM while generation is paused for a weight update."
TOKENS = 48
# A refusal is immediate; an engine that holds the request instead is caught after this.
REJECT_WITHIN_S = 5.0


def _outputs(offline: OfflineClient, rid: str) -> tuple[list[dict], str | None]:
    seen = offline.deliveries().get(rid)
    return (list(seen.outputs), seen.error) if seen else ([], None)


@pytest.mark.behaviour("custody/async-late-arrival")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
@pytest.mark.parametrize("mode", MODES)
def test_async_late_arrival(offline, run_state, mode):
    fate = PROFILES[run_state.profile].late_arrival[mode]
    expected = offline.reference(PROMPT, TOKENS)
    paused = offline.call("pause_generation", then="paused", mode=mode)
    window = REJECT_WITHIN_S if fate == "rejected" else offline.hold_window(TOKENS)
    offline.add("late", PROMPT, TOKENS, kind="delta")
    began = time.monotonic()
    # "started": a token processed, or ended (an error ends it too).
    answered = offline.collect({"late": "started"}, timeout=window)
    seconds = time.monotonic() - began if answered else None
    # Read before the resume is sent: all of this happened while paused.
    progress = offline.progress("late")
    outputs, error = _outputs(offline, "late")
    resumed = offline.call("resume_generation", then="resumed")
    obs = LateArrival(mode, fate, paused, window, seconds, progress, outputs, error, resumed,
                      reference=expected)
    if error is None:
        offline.collect({"late": "finished"})
        obs.outputs, obs.error = _outputs(offline, "late")
    elif fate == "rejected":
        offline.add("retry", PROMPT, TOKENS, kind="delta")
        offline.collect({"retry": "finished"})
        obs.retry_outputs, obs.retry_error = _outputs(offline, "retry")
    problems = late_arrival_problems(obs)
    assert not problems, f"profile {run_state.profile}: " + "; ".join(problems)
