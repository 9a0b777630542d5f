"""A sync changes nothing it does not own. The engine is held by the caller (a keep pause with a
request in flight, or a level-1 sleep with only the weights woken), a late arrival waits, and
a whole session of checkpoint B, /update_weight_version and /weight_checker are sent; after each
call the flags, the gauge, admission and every held request must be as they were before it, and
after the caller's own /resume or /wake_up every held request must run to its end."""

import functools
import time

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import fate, held_state_problems, side_effect_problems
from fixtures.observing.engine import IN_FLIGHT_PROMPT, SETTLE_S
from fixtures.observing.sync_state import ARRIVAL_TOKENS, HttpWatch
from fixtures.spec.profiles import PROFILES

VERSION = "leaves-state-B"


@pytest.mark.behaviour("weights/sync-leaves-state")
@pytest.mark.parametrize("state", ["paused-keep", "asleep-weights-woken"])
def test_sync_leaves_state(goldens, checkpoints, engine, weights, state):
    c = engine.control
    held, size = {}, 0
    if state == "paused-keep":
        gen, size = engine.start_in_flight(IN_FLIGHT_PROMPT)
        reply_is(c.pause(mode="keep"), 200, {"status": "paused"})
        time.sleep(SETTLE_S)  # chunks already on their way
        if gen.done.is_set() and gen.finish_reason == "length":
            raise HarnessError(f"the request ended before the pause landed: nothing held ({gen.summary()})")
        held = {"in-flight": gen}
        release, released = c.resume, {"status": "resumed"}
    else:
        if PROFILES[engine.profile].sleep_requires_pause:
            reply_is(c.pause(mode="abort"), 200, {"status": "paused"})
        reply_is(c.sleep(1), 200, {"status": "sleeping", "level": 1})
        reply_is(c.wake_up(["weights"]), 200, {"status": "sleeping"})
        release, released = functools.partial(c.wake_up, ["kv_cache"]), {"status": "awake"}
    watch = HttpWatch(engine, held)
    watch.arrive()
    before = watch.snapshot()
    problems = held_state_problems(before, state)
    steps = [*weights.session_steps(checkpoints["B"], VERSION),
             (f"update_weight_version ({VERSION}-2)", functools.partial(weights.set_version, f"{VERSION}-2")),
             ("weight_checker checksum", functools.partial(weights.checker, {"action": "checksum"}))]
    for what, step in steps:
        reply = step()
        assert reply.status == 200, f"{state}: {what} was not accepted: {reply.describe()}"
        watch.arrive()
        after = watch.snapshot()
        problems += side_effect_problems(what, before, after)
        before = after
    reply_is(release(), 200, released)
    # Every request still held runs to its end once the caller releases the engine.
    waiting = [(n, watch.held[n], size) for n in watch.held] + [
        (s.name, watch.late[s.name], ARRIVAL_TOKENS) for s in before.late if fate(s) == "held"]
    for name, gen, tokens in waiting:
        if not gen.done.wait(engine.request_timeout):
            problems.append(f"after the release the held {name} did not end within "
                            f"{engine.request_timeout:.0f} s")
            continue
        problems += [f"after the release, {name}: {p}" for p in judges.completion_problems(gen, tokens)]
    assert not problems, f"{state}: " + "; ".join(problems)
