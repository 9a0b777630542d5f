"""Which weights a late arrival runs on: a request sent while the engine is paused for a sync,
in each pause mode, must after /resume run entirely on the synced checkpoint (or, where the
profile rejects late arrivals, be refused and run on it when retried)."""

import pytest

from fixtures.judging import golden, judges
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems
from fixtures.spec.profiles import MODES, PROFILES

REJECT_WITHIN_S = 5.0


@pytest.mark.behaviour("weights/late-arrival-new-version")
@pytest.mark.parametrize("mode", MODES)
def test_late_arrival_new_version(goldens, checkpoints, engine, weights, mode):
    fate = PROFILES[engine.profile].late_arrival[mode]
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    late = engine.gen.start(golden.HTTP_PROMPT, golden.TOKENS)
    if fate == "rejected":
        assert late.done.wait(REJECT_WITHIN_S), (
            f"profile {engine.profile}: the late arrival was neither rejected nor answered within "
            f"{REJECT_WITHIN_S:g} s: {late.summary()}")
        problems = judges.rejection_problems(late)
        assert not problems, f"profile {engine.profile}, mode {mode}: " + "; ".join(problems)
    else:
        counted = engine.wait_load(at_least=1, unless=late.done.is_set)
        assert not late.done.is_set(), (
            f"/pause?mode={mode}: the late arrival was answered before the sync, while paused "
            f"(/load peak {counted}): {late.summary()}")
    weights.sync(checkpoints["B"], f"late-{mode}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    if fate == "rejected":
        late = engine.gen.complete(golden.HTTP_PROMPT, golden.TOKENS)  # the caller's retry
    assert late.done.wait(engine.request_timeout), f"the late arrival did not end: {late.summary()}"
    problems = judges.completion_problems(late, golden.TOKENS)
    problems += serves_problems({"the late arrival": list(late.token_ids)}, "B", goldens,
                                f"/pause?mode={mode}, sync of B, /resume")
    assert not problems, "; ".join(problems)
