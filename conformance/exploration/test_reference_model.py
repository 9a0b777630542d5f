"""Model-based exploration: random call sequences on one live server, each step compared with
the reference model (refmodel/model.py). Hypothesis shrinks a discrepancy to a minimal
sequence; the failure message carries it as curl lines.

Budget: --lifecycle-explore-examples × --lifecycle-explore-steps; --hypothesis-seed replays a
run, and the example database lives beside the run's report folder so a failure replays first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from fixtures.judging import judges
from fixtures.judging import topology_judges as tj
from fixtures.observing import api_shape
from fixtures.observing.client import Generation, Reply, wait_until
from fixtures.observing.engine import Engine
from fixtures.spec.expectations import Instance, finding_reached
from refmodel import model

MAX_TOKENS = 8
MAX_HELD = 3
SHRINK_SECONDS = 60
# A rejection is answered at once; a request still open after this was held, not rejected
# (waiting out the request timeout would only delay the same verdict).
REJECT_WITHIN_S = 5.0
HOLD_GRACE_S = 0.5  # a held request that the engine wrongly runs finishes well within this
WAKE_TAGS = [None, ("weights",), ("kv_cache",), ("scheduling",), ("weights", "kv_cache"), ("bogus",)]


class DiscrepancyError(AssertionError):
    """The engine did something the reference model does not predict."""


def build_machine(engine: Engine, findings: list[str], stats: dict[str, int],
                  in_scope: Callable[[str], bool] = lambda behaviour: True,
                  engines: int = 1) -> type[RuleBasedStateMachine]:
    class LifecycleMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            stats["sequences"] += 1
            engine.to_baseline()
            self.state = model.State(profile=engine.profile)
            self.requests: dict[int, Generation] = {}
            self.numbers = itertools.count(1)
            self.history = model.History(engine.server.url)

        # -- calls ---------------------------------------------------------------------------
        @rule(level=st.sampled_from([0, 1, 2]), mode=st.sampled_from([None, "abort", "keep"]))
        def sleep(self, level: int, mode: str | None) -> None:
            self._call(model.sleep(self.state, level, mode), engine.control.sleep(level, mode),
                       f"POST /sleep level={level} mode={mode or 'default'}")

        # A wait-mode drain with requests queued behind a pause never completes (they are not
        # scheduled while paused), so `wait` is drawn only when nothing is held.
        @precondition(lambda self: not self.state.held)
        @rule(level=st.sampled_from([0, 1, 2]))
        def sleep_wait(self, level: int) -> None:
            self._call(model.sleep(self.state, level, "wait"), engine.control.sleep(level, "wait"),
                       f"POST /sleep level={level} mode=wait")

        @rule(tags=st.sampled_from(WAKE_TAGS))
        def wake_up(self, tags: tuple[str, ...] | None) -> None:
            self._call(model.wake_up(self.state, tags), engine.control.wake_up(tags),
                       f"POST /wake_up tags={list(tags) if tags else None}")

        @rule(mode=st.sampled_from(["abort", "keep"]))
        def pause(self, mode: str) -> None:
            self._call(model.pause(self.state, mode), engine.control.pause(mode),
                       f"POST /pause mode={mode}")

        @precondition(lambda self: not self.state.held)
        @rule()
        def pause_wait(self) -> None:
            self._call(model.pause(self.state, "wait"), engine.control.pause("wait"),
                       "POST /pause mode=wait")

        @rule()
        def resume(self) -> None:
            self._call(model.resume(self.state), engine.control.resume(), "POST /resume")

        @rule()
        def abort_requests(self) -> None:
            self._call(model.abort_all(self.state), engine.control.abort_requests(),
                       "POST /abort_requests")

        @rule()
        def reset_prefix_cache(self) -> None:
            self._call(model.reset_prefix_cache(self.state),
                       engine.control.call("POST", "/reset_prefix_cache"), "POST /reset_prefix_cache")

        @precondition(lambda self: len(self.state.held) < MAX_HELD)
        @rule()
        def request(self) -> None:
            number = next(self.numbers)
            prediction = model.arrive(self.state, number)
            gen = engine.gen.start(f"request {number}", MAX_TOKENS)
            self.requests[number] = gen
            self.history.request(number, MAX_TOKENS, engine.server.config.served_model_name)
            if number in prediction.state.held:
                # Accepted before the next call, or the next call races the arrival.
                wait_until(lambda: gen.done.is_set()
                           or engine.control.load() >= len(prediction.state.held), 10)
            self._judge(prediction, f"request {number} arrives")

        def teardown(self) -> None:
            engine.to_baseline()
            engine.gen.join_all(engine.request_timeout)

        # -- judging -------------------------------------------------------------------------
        def _call(self, prediction: model.Prediction, reply: Reply, label: str) -> None:
            self.history.call(reply.method, reply.path)
            problems = _reply_problems(prediction, reply)
            if problems:
                self._fail(label, prediction, problems)
            self._judge(prediction, label)

        def _judge(self, prediction: model.Prediction, label: str) -> None:
            stats["steps"] += 1
            problems: list[str] = []
            for number in prediction.completes:
                problems += self._ended(number, lambda g: judges.completed(g, MAX_TOKENS))
            for number in prediction.aborted:
                problems += self._ended(number, lambda g: judges.aborted(g, MAX_TOKENS))
            for number in prediction.rejected:
                if not self.requests[number].done.wait(REJECT_WITHIN_S):
                    problems.append(f"request {number}: no rejection within {REJECT_WITHIN_S:g} s; "
                                    f"the request was held instead")
                    continue
                problems += self._ended(number, judges.rejected_while_paused)
            after = prediction.state
            if after.held and wait_until(
                    lambda: any(self.requests[n].done.is_set() for n in after.held), HOLD_GRACE_S):
                ended = [model.Ended(n, tuple(judges.completed(self.requests[n], MAX_TOKENS)),
                                     self.requests[n].summary())
                         for n in after.held if self.requests[n].done.is_set()]
                # Only a finding recorded for this profile, release and platform explains it, and
                # only for a request that ran to its full length; the others stay held.
                ran_problems, finding, after = model.judge_ran_while_held(after, ended, in_scope)
                problems += ran_problems
                if finding is not None:
                    ran = [e.number for e in ended if e.number not in after.held]
                    findings.append(f"{finding}: after '{label}' requests {ran} ran "
                                    f"(asleep {sorted(after.asleep)}, unpaused)")
            observed, disagreements = _observe(engine, len(after.held), engines)
            differences, explained = model.judge_observation(after, observed, in_scope)
            if explained is not None:
                findings.append(f"{explained}: after '{label}' the gauge read {observed.gauge} "
                                f"(asleep {sorted(after.asleep)})")
            problems += differences + disagreements
            if problems:
                self._fail(label, prediction, problems)
            self.state = after

        def _ended(self, number: int, judge: Callable[[Generation], list[str]]) -> list[str]:
            gen = self.requests[number]
            if not gen.done.wait(engine.request_timeout):
                return [f"request {number} did not end within {engine.request_timeout:.0f} s"]
            return [f"request {number}: {p}" for p in judge(gen)]

        def _fail(self, label: str, prediction: model.Prediction, problems: list[str]) -> None:
            raise DiscrepancyError(
                f"after '{label}' (model state before: {self.state}):\n  " + "\n  ".join(problems)
                + f"\nthe model relied on: {', '.join(prediction.relies_on)}\n"
                + self.history.script()
            )

    return LifecycleMachine


def _reply_problems(prediction: model.Prediction, reply: Reply) -> list[str]:
    if prediction.body_mentions is not None:
        if 400 <= reply.status < 500 and prediction.body_mentions in str(reply.body).lower():
            return []
        return [f"expected a 4xx naming '{prediction.body_mentions}'; observed {reply.describe()}"]
    ok = reply.status == prediction.status
    # A release before JSON bodies is judged on the status (the shapes: api/reply-bodies).
    if ok and prediction.body is not None and api_shape.body_expected(reply.path):
        ok = isinstance(reply.body, dict) and all(
            reply.body.get(k, object()) == v for k, v in prediction.body.items())
    if ok:
        return []
    return [f"expected {prediction.status} {prediction.body or ''}; observed {reply.describe()}"]


def _observe(engine: Engine, expected_load: int, engines: int) -> tuple[model.Observation, list[str]]:
    """What the engine shows, and (several engines) where the engines do not agree."""
    # /load drops when a response has been written, a moment after the client saw it end.
    wait_until(lambda: engine.control.load() == expected_load, 2.0)
    if engines == 1:
        gauge = engine.control.sleep_state()
        return model.Observation(
            is_sleeping=engine.control.is_sleeping(), is_paused=engine.control.is_paused(),
            gauge=tuple(int(v) for v in gauge) if gauge else None,  # type: ignore[arg-type]
            load=engine.control.load(),
        ), []
    # Several engines: the flags are consensus queries (a 500 when the engines disagree) and
    # the gauge has one sample per engine label; each must agree before it is compared.
    sleeping = engine.control.call("GET", "/is_sleeping")
    paused = engine.control.call("GET", "/is_paused")
    disagreements = [f"the engines gave no common answer: {r.describe()}"
                     for r in (sleeping, paused) if r.status != 200]
    gauges = tj.gauges(engine.control.metrics_text(), engines)
    gauge = tj.common_gauge(gauges)
    if gauge is None:
        disagreements.append(f"vllm:engine_sleep_state differs between engines: {gauges}")
    return model.Observation(
        is_sleeping=bool(sleeping.body.get("is_sleeping")) if sleeping.status == 200 else False,
        is_paused=bool(paused.body.get("is_paused")) if paused.status == 200 else False,
        gauge=gauge,  # type: ignore[arg-type]
        load=engine.control.load(),
    ), disagreements


def _cap_shrinking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis shrinks for up to 5 minutes; on a live server each attempt costs real calls.
    Its cap is internal, so it is lowered only where it exists under that name."""
    from hypothesis.internal.conjecture import engine as conjecture

    if isinstance(getattr(conjecture, "MAX_SHRINKING_SECONDS", None), int):
        monkeypatch.setattr(conjecture, "MAX_SHRINKING_SECONDS", SHRINK_SECONDS)


@pytest.mark.behaviour("exploration/reference-model")
def test_reference_model(engine, run_state, request, record_property, monkeypatch):
    explore(engine, 1, run_state.config.explore_examples, run_state, request, record_property,
            monkeypatch)


@pytest.mark.behaviour("topology/reference-model")
@pytest.mark.topologies("dp2")
def test_reference_model_on_every_engine(topology_engine, topology, run_state, request,
                                         record_property, monkeypatch):
    explore(topology_engine, topology.engines, run_state.config.topology_explore_examples,
            run_state, request, record_property, monkeypatch)


def explore(engine: Engine, engines: int, examples: int, run_state, request, record_property,
            monkeypatch) -> None:
    suite = run_state.config
    _cap_shrinking(monkeypatch)
    findings: list[str] = []
    stats = {"sequences": 0, "steps": 0}
    # One database per profile and engine count: a sequence saved under another model or
    # topology is no example for this one.
    database = DirectoryBasedExampleDatabase(
        str(suite.report_dir.parent / "hypothesis-db" / f"{engine.profile}-{engines}-engine"))
    budget = settings(
        max_examples=examples, stateful_step_count=suite.explore_steps,
        deadline=None, database=database, print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    try:
        instance = Instance(profile=engine.profile, variant=engine.variant.name, transport="http",
                            release=run_state.target.vllm_version if run_state.target else None,
                            platform=run_state.target.platform if run_state.target else None)

        def in_scope(behaviour: str) -> bool:
            return finding_reached(run_state.expectations, behaviour, instance)

        run_state_machine_as_test(build_machine(engine, findings, stats, in_scope, engines),
                                  settings=budget)
    finally:
        reached = sorted(set(findings))
        record_property("findings_reached", reached)
        record_property("explored", stats)
        entry = run_state.items.get(request.node.nodeid)
        if entry is not None:
            entry["findings_reached"] = reached
            entry["explored"] = stats
