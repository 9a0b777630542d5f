"""Calls made in the wrong state: answered plainly, the engine left serving, and the requests
in flight or held when the call lands left as they were."""

import pytest

from fixtures.judging import with_work
from fixtures.judging.assertions import reply_is, serving, state_is
from fixtures.judging.with_work import Call, answered
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView

AWAKE = StateView(is_sleeping=False, is_paused=False, gauge=AWAKE_GAUGE)
WAKE = Call("POST", "/wake_up")
SLEEP_KEEP = Call("POST", "/sleep?level=1&mode=keep")
UNKNOWN_TAGS = {"bogus": ["bogus"], "comma-joined": ["weights,kv_cache"],
                "valid-plus-bogus": ["weights", "bogus"]}


@pytest.mark.behaviour("misuse/unknown-wake-tag")
@pytest.mark.topologies("single", "api2")
@pytest.mark.topology_params(case="with-work")
@pytest.mark.parametrize("case", [*UNKNOWN_TAGS, "with-work"])
def test_unknown_wake_tag(topology_engine, topology, case):
    engine = topology_engine
    if case == "with-work":
        # Asleep holding one request kept from before the sleep and one arrived during it; every
        # unknown-tag wake, through every API server, wakes nothing and leaves both held.
        held = with_work.hold(engine, topology, SLEEP_KEEP)
        wakes = [Call("POST", "/wake_up?" + "&".join(f"tags={t}" for t in tags))
                 for tags in UNKNOWN_TAGS.values()]
        problems = with_work.repeat_problems(engine, topology, held, wakes,
                                             answered(200, {"status": "sleeping"}), flags=(True, True))
        problems += with_work.still_held_problems(held, "the wakes naming unknown tags")
        problems += with_work.released_problems(engine, held, WAKE)
        assert not problems, "; ".join(problems)
        return
    reply_is(engine.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(engine.control.wake_up(UNKNOWN_TAGS[case]), 200, {"status": "sleeping"})
    # Nothing was woken: weights is still asleep, so waking it is a partial wake.
    reply_is(engine.control.wake_up(["weights"]), 200, {"status": "sleeping"})
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after the full wake")
    serving(engine)


@pytest.mark.behaviour("misuse/sleep-while-asleep")
@pytest.mark.topologies("single", "dp2", "api2")
@pytest.mark.topology_params(case="with-work-keep")
@pytest.mark.parametrize("case", ["level1", "level2", "with-work-keep", "with-work-abort"])
def test_sleep_while_asleep(topology_engine, topology, case):
    engine = topology_engine
    if case.startswith("with-work"):
        # A repeat in keep mode holds on; the default mode (abort) ends what is held, as
        # documented for every pause mode.
        held = with_work.hold(engine, topology, SLEEP_KEEP)
        repeat = SLEEP_KEEP if case == "with-work-keep" else Call("POST", "/sleep?level=1")
        asleep = answered(200, {"status": "sleeping", "level": 1})
        problems = with_work.repeat_problems(engine, topology, held, [repeat], asleep, flags=(True, True))
        if case == "with-work-keep":
            problems += with_work.still_held_problems(held, f"a second {repeat}")
            problems += with_work.released_problems(engine, held, WAKE)
        else:
            problems += with_work.aborted_problems(held, f"a second {repeat}")
            reply_is(engine.control.wake_up(), 200, {"status": "awake"})
        assert not problems, "; ".join(problems)
        serving(engine)
        return
    level = int(case.removeprefix("level"))
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    reply_is(engine.control.sleep(level), 200, {"status": "sleeping", "level": level})
    state_is(engine, StateView(True, True, SLEEP_GAUGE[level]), "after the second sleep")
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after the full wake")
    serving(engine)


@pytest.mark.behaviour("misuse/wake-while-awake")
@pytest.mark.topologies("single", "dp2", "api2")
@pytest.mark.topology_params(work="with-work")
@pytest.mark.parametrize("work", ["idle", "with-work"])
def test_wake_while_awake(topology_engine, topology, work):
    engine = topology_engine
    if work == "with-work":
        problems = with_work.streaming_problems(engine, topology, [WAKE], answered(200, {"status": "awake"}))
        assert not problems, "; ".join(problems)
        return
    reply_is(engine.control.wake_up(), 200, {"status": "awake"})
    state_is(engine, AWAKE, "after wake_up on an awake engine")
    serving(engine)


@pytest.mark.behaviour("misuse/resume-while-running")
@pytest.mark.topologies("single", "dp2", "api2")
@pytest.mark.topology_params(work="with-work")
@pytest.mark.parametrize("work", ["idle", "with-work"])
def test_resume_while_running(topology_engine, topology, work):
    engine = topology_engine
    if work == "with-work":
        problems = with_work.streaming_problems(engine, topology, [Call("POST", "/resume")],
                                                answered(200, {"status": "resumed"}))
        assert not problems, "; ".join(problems)
        return
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    state_is(engine, AWAKE, "after resume on a running engine")
    serving(engine)
