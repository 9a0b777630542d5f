"""The reference model on its own: hand-written sequences with known outcomes."""

from __future__ import annotations

from functools import reduce

import pytest

from fixtures.judging import reference_model as model
from fixtures.judging.reference_model import AWAKE, TAGS, State
from fixtures.spec.catalog import load_catalog


def run(state: State, *steps):
    """Apply steps (callables state -> Prediction); return the predictions made."""
    predictions = []
    for step in steps:
        prediction = step(state)
        predictions.append(prediction)
        state = prediction.state
    return predictions


def final(predictions) -> State:
    return predictions[-1].state


def test_level1_sleep_then_staged_wake_in_either_order():
    for first, second in (("weights", "kv_cache"), ("kv_cache", "weights")):
        state = model.sleep(State(), 1, None).state
        p = [model.sleep(State(), 1, None), model.wake_up(state, (first,))]
        p.append(model.wake_up(p[1].state, (second,)))
        assert p[0].body == {"status": "sleeping", "level": 1}
        assert p[0].state.observation() == model.Observation(True, True, (0, 1, 0), 0)
        assert p[1].body["status"] == "sleeping" and p[1].state.paused
        assert p[1].state.gauge == (0, 1, 0)  # a partial wake does not move the gauge
        assert p[2].body == {"status": "awake", "tags": [second]}
        assert final(p).observation() == model.Observation(False, False, AWAKE, 0)


def test_partial_wake_holds_arrivals_until_the_last_tag():
    p = run(State(), lambda s: model.sleep(s, 2, None), lambda s: model.wake_up(s, ("weights",)),
            lambda s: model.arrive(s, 1), lambda s: model.wake_up(s, ("kv_cache",)))
    assert p[2].state.held == (1,) and not p[2].completes
    assert p[3].completes == (1,) and final(p).held == ()


def test_level0_sleep_is_a_pause_the_scheduling_tag_ends():
    p = run(State(), lambda s: model.sleep(s, 0, "keep"), lambda s: model.wake_up(s, ("scheduling",)))
    assert p[0].state.asleep == frozenset() and p[0].state.gauge == (0, 0, 0)
    assert p[1].body["status"] == "awake" and not final(p).paused


def test_scheduling_tag_does_not_resume_a_level1_sleep():
    p = run(State(), lambda s: model.sleep(s, 1, None), lambda s: model.wake_up(s, ("scheduling",)))
    assert p[1].body["status"] == "sleeping" and final(p).paused and final(p).asleep == TAGS


def test_unknown_tag_is_a_no_op_even_beside_a_valid_one():
    p = run(State(), lambda s: model.sleep(s, 1, None), lambda s: model.wake_up(s, ("weights", "bogus")))
    assert final(p).asleep == TAGS and p[1].body["status"] == "sleeping"


def test_default_sleep_mode_aborts_held_requests_keep_does_not():
    held = run(State(), lambda s: model.pause(s, "keep"), lambda s: model.arrive(s, 1),
               lambda s: model.arrive(s, 2))
    state = final(held)
    assert state.held == (1, 2)
    assert model.sleep(state, 1, None).aborted == (1, 2)
    kept = model.sleep(state, 1, "keep")
    assert kept.aborted == () and kept.state.held == (1, 2)
    woken = model.wake_up(kept.state, None)
    assert woken.completes == (1, 2) and woken.state.observation().load == 0


def test_resume_while_asleep_unpauses_but_requests_must_stay_held():
    p = run(State(), lambda s: model.sleep(s, 1, None), lambda s: model.resume(s),
            lambda s: model.arrive(s, 1))
    assert p[1].body == {"status": "resumed"}
    assert p[1].state.observation() == model.Observation(True, False, (0, 1, 0), 0)
    assert "safety/no-request-while-asleep" in p[1].relies_on
    assert p[2].state.held == (1,) and not p[2].completes  # the contract, not 0.32's behaviour
    finding = model.FINDINGS[0]
    assert finding.explains(p[2].state, "ran-while-held")
    assert not finding.explains(model.sleep(State(), 1, None).state, "ran-while-held")  # paused
    assert not finding.explains(model.replace(p[2].state, profile="layered"), "ran-while-held")


def test_wake_while_awake_resumes_a_pause():
    p = run(State(), lambda s: model.pause(s, "keep"), lambda s: model.arrive(s, 1),
            lambda s: model.wake_up(s, None))
    assert p[2].body == {"status": "awake", "tags": None} and p[2].completes == (1,)


def test_abort_all_and_abort_pause_end_held_requests():
    state = final(run(State(), lambda s: model.pause(s, "keep"), lambda s: model.arrive(s, 1)))
    assert model.abort_all(state).aborted == (1,)
    assert model.pause(state, "abort").aborted == (1,)
    assert model.pause(state, "keep").aborted == ()


@pytest.mark.parametrize(("profile", "mode", "fate"), [
    ("0.32", "abort", "held"), ("0.32", "wait", "held"), ("0.32", "keep", "held"),
    ("0.33", "abort", "rejected"), ("0.33", "wait", "rejected"), ("0.33", "keep", "held"),
    ("layered", "abort", "rejected"), ("layered", "keep", "held"),
])
def test_late_arrival_fate_per_profile(profile, mode, fate):
    prediction = model.arrive(model.pause(State(profile=profile), mode).state, 1)
    if fate == "rejected":
        assert prediction.rejected == (1,) and prediction.status == 503
    else:
        assert prediction.state.held == (1,)
    after = model.resume(prediction.state)
    assert not after.state.admission_closed


def test_layered_sleep_needs_a_pause_and_decides_no_fate():
    refused = model.sleep(State(profile="layered"), 1, None)
    assert refused.status == 400 and refused.body_mentions == "pause"
    assert refused.state == State(profile="layered")
    paused = final(run(State(profile="layered"), lambda s: model.pause(s, "keep"),
                       lambda s: model.arrive(s, 1)))
    slept = model.sleep(paused, 1, "abort")  # the mode is ignored: no fate decided in sleep
    assert slept.status == 200 and slept.aborted == () and slept.state.held == (1,)


def test_a_second_sleep_keeps_memory_state_but_moves_the_gauge():
    p = run(State(), lambda s: model.sleep(s, 1, None), lambda s: model.sleep(s, 0, None))
    assert final(p).asleep == TAGS and final(p).gauge == (0, 0, 0)


def test_every_id_a_transition_relies_on_is_catalogued():
    catalog = load_catalog()
    states = [State(), model.sleep(State(), 1, None).state,
              model.pause(State(), "keep").state, State(profile="layered")]
    steps = [lambda s: model.sleep(s, 1, "keep"), lambda s: model.wake_up(s, None),
             lambda s: model.wake_up(s, ("weights",)), lambda s: model.pause(s, "abort"),
             model.resume, model.abort_all, model.reset_prefix_cache,
             lambda s: model.arrive(s, 9)]
    relied = {i for s in states for step in steps for i in step(s).relies_on}
    assert relied <= set(catalog.behaviours), relied - set(catalog.behaviours)


def test_history_renders_a_runnable_script():
    history = model.History("http://127.0.0.1:8000")
    history.call("POST", "/sleep?level=1")
    history.request(1, 8, "m")
    script = history.script()
    assert "curl -s -X POST 'http://127.0.0.1:8000/sleep?level=1'" in script
    assert '"max_tokens": 8' in script and script.startswith("# reproduction")


def test_history_carries_a_calls_body():
    """/update_weight_version means nothing without its body: the line must replay it."""
    history = model.History("http://127.0.0.1:8000")
    history.call("POST", "/update_weight_version", {"new_version": "u1"})
    assert history.lines == ["curl -s -X POST 'http://127.0.0.1:8000/update_weight_version' "
                             "-H 'Content-Type: application/json' -d '{\"new_version\": \"u1\"}'"]


def test_model_is_pure():
    state = State()
    reduce(lambda s, step: step(s).state, [lambda s: model.sleep(s, 1, None)] * 3, state)
    assert state == State()


def test_gauge_finding_excuses_exactly_the_awake_gauge_of_a_partial_wake():
    """0.27-0.30: after a level-1 sleep and a weights wake the gauge reads awake while the KV
    cache still sleeps. Excused only with the finding in scope, only for the gauge alone."""
    state = final(run(State(), lambda s: model.sleep(s, 1, None),
                      lambda s: model.wake_up(s, ("weights",))))
    assert state.asleep == frozenset({"kv_cache"}) and state.gauge == (0, 1, 0)
    stale = model.Observation(True, True, AWAKE, 0)
    everywhere, nowhere = (lambda b: True), (lambda b: False)
    assert model.judge_observation(state, stale, everywhere) == ([], "flags/partial-wake")
    problems, finding = model.judge_observation(state, stale, nowhere)
    assert finding is None and problems == [f"expected {state.observation()}; observed {stale}"]
    # Anything beside the gauge is still a discrepancy, finding or not.
    for other in (model.Observation(True, False, AWAKE, 0), model.Observation(True, True, AWAKE, 1),
                  model.Observation(True, True, (0, 0, 1), 0)):
        assert model.judge_observation(state, other, everywhere)[1] is None
    # Nothing asleep in the model: an awake gauge is the model's own, nothing to excuse.
    awake = final(run(state, lambda s: model.wake_up(s, ("kv_cache",))))
    assert model.judge_observation(awake, awake.observation(), everywhere) == ([], None)
    assert not model.FINDINGS[1].explains(model.replace(state, profile="layered"),
                                          model.GAUGE_AWAKE_WHILE_ASLEEP)
    assert model.judge_observation(state, model.replace(stale, gauge=None), everywhere)[1] is None


def test_gauge_finding_excuses_no_awake_gauge_outside_a_partial_wake():
    """The finding is the gauge after a partial wake. An awake gauge right after a full sleep
    (the fault gauge-not-updated), after a scheduling-only wake (both tags asleep) or after a
    /resume beside the partial wake is a discrepancy, finding in scope or not."""
    def everywhere(behaviour: str) -> bool:
        return True

    slept = final(run(State(), lambda s: model.sleep(s, 1, None)))
    scheduling = final(run(slept, lambda s: model.wake_up(s, ("scheduling",))))
    resumed = final(run(slept, model.resume, lambda s: model.wake_up(s, ("weights",))))
    assert resumed.asleep == frozenset({"kv_cache"}) and not resumed.paused
    for state in (slept, final(run(State(), lambda s: model.sleep(s, 2, "keep"))), scheduling,
                  resumed):
        stale = model.replace(state.observation(), gauge=AWAKE)
        problems, finding = model.judge_observation(state, stale, everywhere)
        assert finding is None and problems, state
        assert not model.FINDINGS[1].explains(state, model.GAUGE_AWAKE_WHILE_ASLEEP), state
    # Either tag woken first is a partial wake.
    for tag in TAGS:
        half = final(run(slept, lambda s, t=tag: model.wake_up(s, (t,))))
        stale = model.replace(half.observation(), gauge=AWAKE)
        assert model.judge_observation(half, stale, everywhere) == ([], "flags/partial-wake")


def _ended(number: int, gen) -> model.Ended:
    from fixtures.judging import judges

    return model.Ended(number, tuple(judges.completion_problems(gen, 8)), gen.summary())


def _gen(**fields):
    from fixtures.observing.client import Generation

    return Generation(stream=False, max_tokens=8, **fields)


def _asleep_unpaused_holding(*numbers: int) -> State:
    """0.32 stock: /sleep?level=1, /resume, then requests arrive (the model holds them)."""
    steps = [lambda s: model.sleep(s, 1, None), model.resume]
    steps += [lambda s, n=n: model.arrive(s, n) for n in numbers]
    return final(run(State(), *steps))


def test_ran_while_held_finding_excuses_only_a_request_run_to_its_full_length():
    """safety/no-request-while-asleep: on 0.32 a request sent after /resume runs while asleep
    and completes. Only that is the finding; the request leaves the held set, the rest stay."""
    state = _asleep_unpaused_holding(1, 2)
    full = _ended(1, _gen(finish_reasons={0: "length"}, completion_tokens=8))
    problems, finding, after = model.judge_ran_while_held(state, [full], lambda b: True)
    assert (problems, finding) == ([], "safety/no-request-while-asleep")
    assert after.held == (2,) and after.asleep == TAGS and not after.paused
    # Out of the finding's scope (another release or platform): the same run is a discrepancy.
    problems, finding, after = model.judge_ran_while_held(state, [full], lambda b: False)
    assert finding is None and problems == [f"request 1 answered while the model holds it: "
                                            f"{full.summary}"]
    assert after.held == (1, 2)


@pytest.mark.parametrize("how", [
    {"error": RuntimeError("connection reset")},  # errored
    {"finish_reasons": {0: "length"}, "completion_tokens": 3},  # cut short
    {"finish_reasons": {0: "abort"}, "completion_tokens": 2},  # aborted
    {"finish_reasons": {0: None}, "completion_tokens": None},  # ended with no finish reason
])
def test_ran_while_held_finding_does_not_excuse_an_error_a_cut_or_an_abort(how):
    state = _asleep_unpaused_holding(1, 2)
    full = _ended(2, _gen(finish_reasons={0: "length"}, completion_tokens=8))
    broken = _ended(1, _gen(**how))
    problems, finding, after = model.judge_ran_while_held(state, [broken, full], lambda b: True)
    assert len(problems) == 1 and problems[0].startswith("request 1 answered while the model holds")
    assert "observed finish_reasons=" in problems[0]
    assert finding == "safety/no-request-while-asleep" and after.held == (1,)


def test_ran_while_held_is_never_excused_while_paused_or_awake_memory():
    full = _ended(1, _gen(finish_reasons={0: "length"}, completion_tokens=8))
    paused = final(run(State(), lambda s: model.pause(s, "keep"), lambda s: model.arrive(s, 1)))
    asleep = final(run(State(), lambda s: model.sleep(s, 1, "keep"), lambda s: model.arrive(s, 1)))
    for state in (paused, asleep, model.replace(_asleep_unpaused_holding(1), profile="layered")):
        problems, finding, after = model.judge_ran_while_held(state, [full], lambda b: True)
        assert problems and finding is None and after.held == (1,), state
    assert model.judge_ran_while_held(paused, [], lambda b: True) == ([], None, paused)


def _held_on_two_engines(mode: str = "keep") -> State:
    """dp2: /pause?mode=M, then request 1 pinned to engine 0 and request 2 to engine 1."""
    return final(run(State(), lambda s: model.pause(s, mode), lambda s: model.arrive(s, 1, 0),
                     lambda s: model.arrive(s, 2, 1)))


def test_on_data_parallel_engines_each_engine_holds_its_own_requests():
    state = _held_on_two_engines()
    assert state.held == (1, 2) and state.held_on(0) == (1,) and state.held_on(1) == (2,)
    assert state.observation().load == 2
    released = model.resume(state)
    assert released.completes == (1, 2) and released.state.held == ()
    assert [released.state.request(n) for n in released.completes] == ["request 1 on engine 0",
                                                                        "request 2 on engine 1"]
    assert model.arrive(State(), 3).state.request(3) == "request 3"  # not pinned: one engine


def test_a_history_in_which_one_engine_aborts_its_held_request_is_a_discrepancy_naming_it():
    """/pause?mode=keep holds both engines' requests; engine 1 ends its own with 'abort' (as if
    it took the keep for an abort), engine 0 keeps holding: the model holds both."""
    state = _held_on_two_engines()
    cut = _ended(2, _gen(finish_reasons={0: "abort"}, completion_tokens=0))
    problems, finding, after = model.judge_ran_while_held(state, [cut], lambda b: True)
    assert finding is None and after.held == (1, 2)
    assert problems == [f"request 2 on engine 1 answered while the model holds it: {cut.summary}"]
    # Engine 1 running its held request to its end while paused is no finding either.
    ran = _ended(2, _gen(finish_reasons={0: "length"}, completion_tokens=8))
    problems, finding, _ = model.judge_ran_while_held(state, [ran], lambda b: True)
    assert finding is None and problems[0].startswith("request 2 on engine 1 answered")


# -- weight syncs in the model: where they may happen, what they change -----------------------
def test_a_sync_is_documented_while_paused_with_the_weights_resident():
    assert not State().can_sync
    paused = model.pause(State(), "keep").state
    assert paused.can_sync
    asleep = model.sleep(paused, 2, None).state
    assert not asleep.can_sync  # weights discarded: nothing to load into
    weights_woken = model.wake_up(asleep, ("weights",)).state
    assert weights_woken.can_sync and weights_woken.asleep == {"kv_cache"}


def test_a_sync_switches_the_checkpoint_and_commits_only_a_given_version():
    paused = model.pause(State(version="default"), "keep").state
    synced = model.sync(paused, "B", "v1")
    assert (synced.state.weights, synced.state.version, synced.status) == ("B", "v1", 200)
    assert synced.completes == synced.aborted == ()
    unversioned = model.sync(synced.state, "A", None).state
    assert (unversioned.weights, unversioned.version) == ("A", "v1")
    assert model.set_weight_version(unversioned, "u1").state.version == "u1"
    assert "weights/version-follows-commits" in synced.relies_on


def test_a_request_released_after_a_sync_runs_on_the_new_checkpoint():
    held = model.arrive(model.pause(State(), "keep").state, 1).state
    synced = model.sync(held, "B", None).state
    resumed = model.resume(synced)
    assert resumed.completes == (1,) and resumed.state.weights == "B"


def test_the_observed_version_is_judged_where_the_model_tracks_it():
    state = State(version="v1")
    seen = model.Observation(False, False, AWAKE, 0, "v1")
    assert model.judge_observation(state, seen, lambda b: True) == ([], None)
    stale = model.Observation(False, False, AWAKE, 0, "default")
    problems, excused = model.judge_observation(state, stale, lambda b: True)
    assert excused is None and "version='v1'" in problems[0] and "version='default'" in problems[0]
    untracked = model.Observation(False, False, AWAKE, 0)
    assert model.judge_observation(State(), untracked, lambda b: True) == ([], None)


def test_a_level2_sleep_leaves_the_weights_undefined_until_a_sync():
    discarded = final(run(State(), lambda s: model.sleep(s, 2, None),
                          lambda s: model.wake_up(s, None)))
    assert discarded.weights is None  # vLLM: reload after a level-2 wake
    offloaded = final(run(State(), lambda s: model.sleep(s, 1, None),
                          lambda s: model.wake_up(s, None)))
    assert offloaded.weights == "A"  # level 1 keeps a copy and restores it
    # A second sleep while the weights are already offloaded changes no memory.
    again = final(run(State(), lambda s: model.sleep(s, 1, None), lambda s: model.sleep(s, 2, None)))
    assert again.weights == "A"
    colocated = final(run(State(), lambda s: model.sleep(s, 2, None),
                          lambda s: model.wake_up(s, ("weights",)),
                          lambda s: model.sync(s, "B", None),
                          lambda s: model.wake_up(s, ("kv_cache",))))
    assert (colocated.weights, colocated.runnable) == ("B", True)


# -- long requests that outlive calls: what each call may do to them --------------------------
def _running(*numbers: int, state: State | None = None) -> State:
    """Long requests `numbers` started on a runnable engine (State() unless given)."""
    steps = [lambda s, n=n: model.start(s, n) for n in numbers]
    return final(run(state or State(), *steps))


def _paused_keeping(mode: str = "keep") -> State:
    return final(run(_running(1), lambda s: model.pause(s, mode)))


# (name, the state the call meets, the call, what it does to running request 1)
RUNNING_FATES = [
    ("pause abort", _running(1), lambda s: model.pause(s, "abort"), "may abort"),
    ("pause keep", _running(1), lambda s: model.pause(s, "keep"), "keeps"),
    ("pause wait", _running(1), lambda s: model.pause(s, "wait"), "drains"),
    ("pause wait over keep", _paused_keeping(), lambda s: model.pause(s, "wait"), "keeps"),
    ("pause keep over keep", _paused_keeping(), lambda s: model.pause(s, "keep"), "keeps"),
    ("pause abort over keep", _paused_keeping(), lambda s: model.pause(s, "abort"), "may abort"),
    ("default sleep", _running(1), lambda s: model.sleep(s, 1, None), "may abort"),
    ("sleep abort", _running(1), lambda s: model.sleep(s, 0, "abort"), "may abort"),
    ("sleep keep", _running(1), lambda s: model.sleep(s, 2, "keep"), "keeps"),
    ("sleep wait", _running(1), lambda s: model.sleep(s, 1, "wait"), "drains"),
    ("sleep wait over keep", _paused_keeping(), lambda s: model.sleep(s, 1, "wait"), "keeps"),
    ("abort_requests", _running(1), model.abort_all, "may abort"),
    ("resume while running", _running(1), model.resume, "keeps"),
    ("resume after keep", _paused_keeping(), model.resume, "keeps"),
    ("wake while awake", _running(1), lambda s: model.wake_up(s, None), "keeps"),
    ("wake while paused", _paused_keeping(), lambda s: model.wake_up(s, None), "keeps"),
    ("unknown tag", _running(1), lambda s: model.wake_up(s, ("bogus",)), "keeps"),
    ("prefix reset", _running(1), model.reset_prefix_cache, "keeps"),
    ("version", _running(1), lambda s: model.set_weight_version(s, "v"), "keeps"),
    ("arrival", _running(1), lambda s: model.arrive(s, 2), "keeps"),
    *((f"refused {path}", state, lambda s, p=path: model.refused(s, p), "keeps")
      for path in model.REFUSED_CALLS for state in (_running(1), _paused_keeping())),
    ("layered sleep while paused", _running(1, state=State(profile="layered")),
     lambda s: model.sleep(model.pause(s, "keep").state, 1, "abort"), "keeps"),
]


@pytest.mark.parametrize(("state", "call", "fate"), [r[1:] for r in RUNNING_FATES],
                         ids=[r[0] for r in RUNNING_FATES])
def test_each_call_keeps_drains_or_may_abort_a_running_request(state, call, fate):
    prediction = call(state)
    assert prediction.aborted == () and 1 not in prediction.completes
    if fate == "keeps":
        assert prediction.state.running == (1,) and not prediction.may_abort and not prediction.drained
    elif fate == "drains":
        assert prediction.drained == (1,) and prediction.state.running == () and not prediction.may_abort
    else:
        assert prediction.may_abort == (1,) and prediction.state.running == () and not prediction.drained


def test_a_long_request_starts_only_on_a_runnable_engine_and_is_pinned():
    state = final(run(State(), lambda s: model.start(s, 1, 0), lambda s: model.start(s, 2, 1)))
    assert state.running == (1, 2) and state.request(2) == "request 2 on engine 1"
    for not_runnable in (model.pause(State(), "keep").state, model.sleep(State(), 1, "keep").state,
                         model.pause(State(profile="0.33"), "abort").state):
        with pytest.raises(ValueError, match="runnable"):
            model.start(not_runnable, 1)


def test_a_sleep_wait_drains_before_the_memory_goes_and_the_held_stay_held():
    """Drained is decided on the engine as the call met it (runnable), not as it leaves it."""
    prediction = model.sleep(_running(1, 2), 2, "wait")
    assert prediction.drained == (1, 2) and prediction.state.asleep == TAGS
    kept = model.sleep(_running(1), 1, "keep")
    assert kept.state.running == (1,) and kept.state.asleep == TAGS and kept.state.paused


def test_repeats_and_refusals_name_their_misuse_behaviour():
    paused = _paused_keeping()
    assert "misuse/pause-while-paused" in model.pause(paused, "keep").relies_on
    assert "misuse/pause-while-paused" not in model.pause(State(), "keep").relies_on
    assert "misuse/sleep-while-asleep" in model.sleep(model.sleep(State(), 1, None).state, 1,
                                                      "keep").relies_on
    assert "misuse/resume-while-running" in model.resume(State()).relies_on
    assert "misuse/wake-while-awake" in model.wake_up(State(), None).relies_on
    for path, behaviour in model.REFUSED_CALLS.items():
        for state in (_running(1), paused, _asleep_unpaused_holding(1)):
            refused = model.refused(state, path)
            assert refused.status == 400 and refused.state == state, path
            assert not (refused.aborted or refused.may_abort or refused.drained or refused.completes)
            expected = ("misuse/invalid-mode-while-paused" if path.startswith("/pause")
                        and state.paused else behaviour)
            assert refused.relies_on == (expected,), (path, state)


def test_the_load_may_count_running_requests_not_yet_finished():
    """Held requests are counted; running ones may be, until the engine finishes them."""
    assert _paused_keeping().load_range == (0, 1)  # request 1 kept (running), none held
    state = final(run(State(), lambda s: model.start(s, 1), lambda s: model.start(s, 2),
                      lambda s: model.pause(s, "keep"), lambda s: model.arrive(s, 3)))
    assert state.held == (3,) and state.running == (1, 2) and state.load_range == (1, 3)
    nowhere = lambda b: False  # noqa: E731
    for load in (1, 2, 3):
        seen = model.replace(state.observation(), load=load)
        assert model.judge_observation(state, seen, nowhere) == ([], None), load
    for load in (0, 4):
        seen = model.replace(state.observation(), load=load)
        problems, finding = model.judge_observation(state, seen, nowhere)
        assert finding is None and problems == [f"expected {state.observation()} (a load of 1 to 3); "
                                                 f"observed {seen}"], load
    # A load in range does not hide another difference.
    other = model.replace(state.observation(), load=2, is_paused=False)
    assert model.judge_observation(state, other, nowhere)[0]


def _long(number: int, **fields) -> model.Ended:
    from fixtures.judging import judges
    from fixtures.observing.client import Generation

    gen = Generation(stream=True, max_tokens=900, **fields)
    return model.Ended(number, tuple(judges.completion_problems(gen, 900)), gen.summary())


def test_a_running_request_may_end_only_in_full_unless_a_call_hit_it():
    state = _running(1, 2, 3)
    full = _long(1, finish_reasons={0: "length"}, completion_tokens=900)
    cut = _long(2, finish_reasons={0: "abort"}, completion_tokens=310)
    problems, after = model.judge_running(state, [full, cut])
    assert after.running == (3,)
    assert len(problems) == 1 and problems[0].startswith(
        "request 2 ended while the model has it running (it may only finish in full)")
    assert model.judge_running(state, []) == ([], state)


def test_a_running_request_a_call_hit_may_end_in_full_or_by_an_abort():
    from fixtures.judging import judges
    from fixtures.observing.client import Generation

    def judged(**fields) -> list[str]:
        gen = Generation(stream=True, max_tokens=900, **fields)
        return model.hit_problems(judges.completion_problems(gen, 900), judges.abort_problems(gen, 900))

    assert judged(finish_reasons={0: "length"}, completion_tokens=900) == []
    assert judged(finish_reasons={0: "abort"}, completion_tokens=120) == []
    for broken in ({"error": RuntimeError("reset")},
                   {"finish_reasons": {0: "length"}, "completion_tokens": 5},
                   {"finish_reasons": {0: None}, "completion_tokens": None}):
        problems = judged(**broken)
        assert len(problems) == 1 and problems[0].startswith("ended neither in full nor by an abort")


def test_every_id_the_new_calls_rely_on_is_catalogued():
    catalog = load_catalog()
    relied = {i for path in model.REFUSED_CALLS for state in (State(), _paused_keeping())
              for i in model.refused(state, path).relies_on}
    relied |= set(model.start(State(), 1).relies_on)
    relied |= {i for _, state, call, _ in RUNNING_FATES for i in call(state).relies_on}
    assert relied <= set(catalog.behaviours), relied - set(catalog.behaviours)
