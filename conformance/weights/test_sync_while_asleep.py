"""A sync sent while the engine sleeps (weights not woken): whatever the release does with it,
the engine must not die or serve a mix. Refused before any chunk loaded, it keeps checkpoint
A; accepted in full, it serves B after a full wake."""

import pytest

from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems, session_outcome
from fixtures.observing.weight_sync import outputs


@pytest.mark.behaviour("weights/sync-while-asleep")
@pytest.mark.parametrize("level", [1, 2])
def test_sync_while_asleep(goldens, checkpoints, engine, weights, note, level):
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    calls = weights.try_push(checkpoints["B"], f"asleep-{level}")
    engine.server.ensure_alive()
    note("calls while asleep: " + ", ".join(f"{c.route} {c.status}" for c in calls))
    health = engine.control.health()
    assert health == 200, f"after a sync sent at sleep level {level}: /health answered {health}"
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    outcome = session_outcome(calls)
    assert outcome is not None, (
        f"sleep level {level}: chunks were accepted and a later call refused: "
        + ", ".join(f"{c.route} {c.status} {str(c.answer)[:120]}" for c in calls))
    expected = "B" if outcome == "landed" else "A"
    found = outputs(engine, 1, golden.HTTP_PROMPT, golden.TOKENS)
    problems = serves_problems(found, expected, goldens,
                               f"sleep level {level}, a sync {outcome} while asleep, full wake")
    assert not problems, "; ".join(problems)
