"""A sync through the Python API changes nothing it does not own. AsyncLLM is held by a keep
pause with a request in flight; LLM (no pause in 0.32/0.33) by a level-1 sleep with only the
weights woken. A late arrival waits, and a whole session of checkpoint B,
update_weight_version and the weight checksums are called; after each call the flags,
admission and every held request must be as they were before it, and after the caller's own
resume_generation / wake_up every held request must run to its end."""

import functools

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.offline_judges import return_problems
from fixtures.judging.weight_judges import fate, held_state_problems, side_effect_problems
from fixtures.observing.engine import SETTLE_S
from fixtures.observing.offline import OfflineClient, flight_rid
from fixtures.observing.sync_state import ARRIVAL_TOKENS, OfflineWatch, offline_seen
from fixtures.observing.weight_sync import OfflineWeights

VERSION = "leaves-state-B"


def hold(offline: OfflineClient) -> tuple[str, list[str], int, list[str]]:
    """Hold the engine as the caller would for a sync: the state's name, the requests held,
    their size, and the problems the holding calls showed."""
    if offline.engine.api == "AsyncLLM":
        size, _ = offline.start_in_flight("delta", "running", size=offline.in_flight_tokens(3.0))
        problems = return_problems(offline.call("pause_generation", mode="keep"))
        offline.settle(SETTLE_S)
        seen = offline_seen(flight_rid(None), dict(offline.op("progress")),
                            offline.deliveries().get(flight_rid(None)))
        if seen.ended == "finish_reason 'length'":
            raise HarnessError(f"the request ended before the pause landed: nothing held ({seen})")
        return "paused-keep", [flight_rid(None)], size, problems
    problems = return_problems(offline.call("sleep", level=1))
    problems += return_problems(offline.call("wake_up", tags=["weights"]), False)
    return "asleep-weights-woken", [], 0, problems


@pytest.mark.behaviour("weights/sync-leaves-state")
def test_sync_leaves_state_offline(checkpoints, offline, offline_weights):
    w: OfflineWeights = offline_weights
    state, held, size, problems = hold(offline)
    watch = OfflineWatch(offline, held)
    watch.arrive()
    before = watch.snapshot()
    problems += held_state_problems(before, state)
    steps = [*w.session_steps(checkpoints["B"], VERSION),
             (f"update_weight_version ({VERSION}-2)", functools.partial(w.set_version, f"{VERSION}-2")),
             ("compute_weight_checksums", w.checksums)]
    for what, step in steps:
        step()  # a call that raises fails the test, named (OfflineWeights)
        watch.arrive()
        after = watch.snapshot()
        problems += side_effect_problems(what, before, after)
        before = after
    if offline.engine.api == "AsyncLLM":
        problems += return_problems(offline.call("resume_generation"))
    else:
        problems += return_problems(offline.call("wake_up", tags=["kv_cache"]), True)
    # Every request still held runs to its end once the caller releases the engine.
    waiting = {rid: size for rid in held} | {s.name: ARRIVAL_TOKENS for s in before.late if fate(s) == "held"}
    if not offline.collect({rid: "finished" for rid in waiting}):
        problems.append(f"after the release the held requests did not all end within {offline.timeout:.0f} s")
    progress, seen = dict(offline.op("progress")), offline.deliveries()
    for rid, tokens in waiting.items():
        end = offline_seen(rid, progress, seen.get(rid))
        if end.ended != "finish_reason 'length'" or end.tokens != tokens:
            problems.append(f"after the release, {rid}: expected {tokens} tokens and finish_reason "
                            f"'length'; observed {end.tokens} tokens, {end.ended or 'not ended'}")
    assert not problems, f"{state}: " + "; ".join(problems)
