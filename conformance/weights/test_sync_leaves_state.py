"""A sync changes nothing it does not own. The engine is held by the caller (a keep pause with a
request in flight, or a level-1 sleep with only the weights woken), a late arrival waits, and a
whole session of checkpoint B, update_weight_version and the weight checker are sent; after each
call the flags (over HTTP the gauge too), admission and every held request must be as they were
before it, and after the caller's own resume or wake every held request must run to its end."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.protocol_judges import answer_problems
from fixtures.judging.weight_judges import ended_problems, fate, held_state_problems, side_effect_problems
from fixtures.observing.sync_state import ARRIVAL_TOKENS
from fixtures.protocol.capabilities import PAUSE

VERSION = "leaves-state-B"


def hold(lifecycle, w, state: str) -> tuple[list[str], dict[str, int]]:
    """Hold the engine as the caller would for a sync: the holding calls' problems, and the
    requests held with their sizes."""
    c = lifecycle.control
    if state == "paused-keep":
        size = w.hold_in_flight()
        problems = answer_problems(c.pause("keep"))
        w.settle()
        if any(s.ended == "finish_reason 'length'" for s in w.snapshot().held):
            raise HarnessError("the request ended before the pause landed: nothing held")
        return problems, {"in-flight": size}
    problems = answer_problems(c.pause("abort")) if w.sleep_needs_pause else []
    problems += answer_problems(c.sleep(1)) + answer_problems(c.wake_up(["weights"]), awake=False)
    return problems, {}


@pytest.mark.behaviour("weights/sync-leaves-state")
@pytest.mark.parametrize("state", ["paused-keep", "asleep-weights-woken"])
def test_sync_leaves_state(checkpoints, lifecycle, weight_sync, state):
    w = weight_sync
    if state == "paused-keep":
        lifecycle.require(PAUSE)
    elif w.transport != "http" and PAUSE not in lifecycle.missing:
        pytest.skip("through the Python API the sleep hold is LLM's (it has no pause); AsyncLLM is "
                    "held by its keep pause (paused-keep)")
    problems, held = hold(lifecycle, w, state)
    w.arrive()
    before = w.snapshot()
    problems += held_state_problems(before, state)
    for what, step in w.steps(checkpoints["B"], VERSION):
        step()  # a call not accepted fails the test, named
        w.arrive()
        after = w.snapshot()
        problems += side_effect_problems(what, before, after)
        before = after
    c = lifecycle.control
    release = c.resume() if state == "paused-keep" else c.wake_up(["kv_cache"])
    problems += answer_problems(release, awake=None if state == "paused-keep" else True)
    # Every request still held runs to its end once the caller releases the engine.
    waiting = held | {s.name: ARRIVAL_TOKENS for s in before.late if fate(s) == "held"}
    problems += ended_problems(w.ends(list(waiting)), waiting, w.timeout)
    assert not problems, f"{state}: " + "; ".join(problems)
