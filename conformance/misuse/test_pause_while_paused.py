"""/pause on an engine already paused: a repeat is accepted, a bad mode refused, still paused;
and the requests the first pause holds meet the fate the second pause's mode gives them."""

from __future__ import annotations

import pytest

from fixtures.judging import with_work
from fixtures.judging.assertions import reply_is, serving, state_is
from fixtures.judging.with_work import Call, answered, refused
from fixtures.observing.engine import AWAKE_GAUGE, StateView
from fixtures.spec.profiles import MODES

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
# A pause moves neither the gauge nor memory; is_sleeping reads true (paused or asleep).
PAUSED = StateView(is_sleeping=True, is_paused=True, gauge=AWAKE_GAUGE)
RESUME = Call("POST", "/resume")
# With work: the first pause, then the second; keep and wait hold what the first held, abort
# ends it ("Abort all in-flight requests immediately").
PAIRS = {"keep-then-keep": ("keep", "keep"), "keep-then-wait": ("keep", "wait"),
         "wait-then-keep": ("wait", "keep"), "keep-then-abort": ("keep", "abort")}


def pause(mode: str) -> Call:
    return Call("POST", f"/pause?mode={mode}")


@pytest.mark.behaviour("misuse/invalid-mode-while-paused")
@pytest.mark.topologies("single", "api2")
@pytest.mark.topology_params(mode="with-work")
@pytest.mark.parametrize("mode", [*MODES, "with-work"])
def test_invalid_mode_while_paused(topology_engine, topology, mode):
    engine = topology_engine
    if mode == "with-work":
        held = with_work.hold(engine, topology, pause("keep"))
        problems = with_work.repeat_problems(engine, topology, held, [pause("invalid")],
                                             refused("query.mode"), flags=(True, True))
        problems += with_work.still_held_problems(held, "/pause?mode=invalid while paused (keep)")
        problems += with_work.released_problems(engine, held, RESUME)
        assert not problems, "; ".join(problems)
        return
    reply_is(engine.control.pause(mode), 200, {"status": "paused"})
    reply = engine.control.pause("invalid")
    error = reply.body.get("error") if isinstance(reply.body, dict) else None
    param = error.get("param") if isinstance(error, dict) else None
    assert reply.status == 400 and param == "query.mode", (
        f"/pause?mode=invalid while paused ({mode}): expected 400 with error.param 'query.mode'; "
        f"observed {reply.describe()}"
    )
    state_is(engine, PAUSED, f"after the refused /pause?mode=invalid while paused ({mode})")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after /resume")
    serving(engine)


@pytest.mark.behaviour("misuse/pause-while-paused")
@pytest.mark.topologies("single", "dp2", "api2")
@pytest.mark.topology_params(mode="keep-then-keep")
@pytest.mark.parametrize("mode", [*MODES, *PAIRS])
def test_pause_while_paused(topology_engine, topology, mode):
    engine = topology_engine
    if mode in PAIRS:
        first, second = PAIRS[mode]
        # A wait pause drains what runs before it answers: only the arrived requests are held.
        held = with_work.hold(engine, topology, pause(first), keep=first == "keep")
        step = f"/pause?mode={second} over /pause?mode={first}"
        problems = with_work.repeat_problems(engine, topology, held, [pause(second)],
                                             answered(200, {"status": "paused"}), flags=(True, True))
        if second == "abort":
            problems += with_work.aborted_problems(held, step)
            reply_is(engine.control.resume(), 200, {"status": "resumed"})
        else:
            problems += with_work.still_held_problems(held, step)
            problems += with_work.released_problems(engine, held, RESUME)
        assert not problems, "; ".join(problems)
        serving(engine)
        return
    for attempt in ("first", "second"):
        reply_is(engine.control.pause(mode), 200, {"status": "paused"})
        state_is(engine, PAUSED, f"after the {attempt} /pause?mode={mode}")
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after one /resume")
    serving(engine)
