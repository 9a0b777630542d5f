"""Model-based exploration: random call sequences on one live server, each step compared with
the reference model (fixtures/judging/reference_model.py). Hypothesis shrinks a discrepancy to a minimal
sequence; the failure message carries it as curl lines.

Where the suite can sync weights (its embedded model and backend, a release with the session),
the calls include whole weight syncs of checkpoint A or B (while paused, weights resident) and
/update_weight_version: every request that runs must give the golden output of the checkpoint
the model says is loaded, and /weight_info the version the model says was committed.

Long requests (long_request) outlive several calls: no call's timing says when one ends, so
each is judged by how it may end (fixtures/judging/reference_model.py, State.running): in full,
unless a call the model says may abort it hit it; a no-op, repeated or refused call that ends
one is a discrepancy.

Budget: --lifecycle-explore-examples × --lifecycle-explore-steps; --hypothesis-seed replays a
run, and the example database lives beside the run's report folder so a failure replays first.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule, run_state_machine_as_test

from fixtures.errors import HarnessError, ServerDiedError
from fixtures.judging import golden, judges
from fixtures.judging import reference_model as model
from fixtures.judging import topology_judges as tj
from fixtures.judging.delivery import first_difference
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.client import Generation, Reply, wait_until
from fixtures.observing.engine import Engine, rank_headers
from fixtures.observing.weight_sync import Checkpoint, WeightClient
from fixtures.spec.expectations import Instance, finding_reached

MAX_TOKENS = 8
MAX_HELD = 3
# A long request decodes for about this long at full speed: long enough to span several calls,
# short enough to keep the exploration's budget; at most MAX_RUNNING run at once.
LONG_REQUEST_SECONDS = 3.0
MAX_RUNNING = 2
# A drained request's last chunk can reach the client a moment after the drain answered.
DRAIN_SETTLE_S = 3.0
START_WITHIN_S = 10.0  # a long request streams its first chunk within this, or its whole decode
SHRINK_SECONDS = 60
# A rejection is answered at once; a request still open after this was held, not rejected
# (waiting out the request timeout would only delay the same verdict).
REJECT_WITHIN_S = 5.0
HOLD_GRACE_S = 0.5  # a held request that the engine wrongly runs finishes well within this
WAKE_TAGS = [None, ("weights",), ("kv_cache",), ("scheduling",), ("weights", "kv_cache"), ("bogus",)]


class DiscrepancyError(AssertionError):
    """The engine did something the reference model does not predict."""


@dataclass(frozen=True)
class Weights:
    """What the exploration needs to sync: the checkpoints, their golden outputs cut to the
    tokens a request asks for (enough to tell A from B), and the engine count for the chunks."""

    checkpoints: dict[str, Checkpoint]
    goldens: dict[str, list[int]]
    tokens: int
    engines: int

    @classmethod
    def of(cls, checkpoints: dict[str, Checkpoint], goldens: dict[str, list[int]], engines: int) -> Weights:
        apart = first_difference(goldens["A"], goldens["B"])
        tokens = max(MAX_TOKENS, (apart or 0) + 1)
        return cls(checkpoints, {k: list(v[:tokens]) for k, v in goldens.items()}, tokens, engines)


def _version(engine: Engine) -> tuple[str | None, list[str]]:
    """GET /weight_info's version (under DP the engines' common answer), or what went wrong."""
    reply = engine.control.call("GET", "/weight_info")
    if reply.status != 200 or not isinstance(reply.body, dict):
        return None, [f"GET /weight_info gave no common version: {reply.describe()}"]
    return str(reply.body.get("weight_version")), []


# Inside the scope of a finding that kills a data-parallel engine (fixtures.judging.reference_model.FINDINGS,
# kills_data_parallel: stock vLLM runs a request on one rank after /resume while the other,
# asleep, never joins its forward), the DP exploration resumes only awake engines: the finding's
# own test judges it, and the run notes what was left out. Outside the scope it explores in full.
RESUME_ASLEEP_NOTE = (
    "no /resume while asleep drawn on {engines} engines: in the scope of the finding of "
    "{finding}, stock vLLM's scheduler then runs a request on one rank while the asleep rank "
    "skips the forward the step waits for, and the engine core dies at the execute_model "
    "timeout (conformance/findings.yaml)")


def serve_line(engines: int, weights: Weights | None) -> str:
    """How to start a server the replay of a sequence runs against (its SERVE line)."""
    line = "VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --enable-server-load-tracking"
    if engines > 1:
        line += f" --data-parallel-size {engines} (MODEL: one whose config declares experts)"
    if weights is not None:
        line += (" --weight-transfer-config '{\"backend\": \"lifecycle_file\"}', with the conformance "
                 "suite installed in the server's environment (pip install -e <suite checkout>: vLLM "
                 "loads its lifecycle_file backend through the vllm.general_plugins entry point); the "
                 "weight syncs name checkpoint files that must exist on the server's host (the "
                 "suite's embedded model and its checkpoint B: python -m fixtures.in_target.tiny_model "
                 "and python -m fixtures.in_target.tiny_model b, from the suite's checkout)")
    return line


def build_machine(engine: Engine, findings: list[str], stats: dict[str, int],
                  in_scope: Callable[[str], bool] = lambda behaviour: True,
                  engines: int = 1, weights: Weights | None = None,
                  save_replay: Callable[[str], str] | None = None) -> type[RuleBasedStateMachine]:
    client = WeightClient(engine.control, engine.server.facts)
    resume_kills = model.kills_data_parallel(engines, in_scope) is not None
    ranks = tuple(range(engines)) if engines > 1 else (None,)
    loaded = {"label": "A"}  # what the last sync left on the engine, across sequences
    tokens = weights.tokens if weights else MAX_TOKENS
    # The refused calls whose behaviour has no finding in this run's scope (before 0.32 the
    # routes took an invalid level or mode: conformance/findings.yaml).
    refusals = [path for path, behaviour in model.REFUSED_CALLS.items()
                if not in_scope(behaviour)
                and not (path.startswith("/pause") and in_scope("misuse/invalid-mode-while-paused"))]

    def put_back_a() -> None:
        """A sequence that ended on B (or mid-sync) leaves A for the next one and the tests after."""
        if weights is None or loaded["label"] == "A":
            return
        engine.to_baseline()
        engine.control.pause("keep")
        client.push(weights.checkpoints["A"], "exploration-restore", weights.engines)
        engine.control.resume()
        loaded["label"] = "A"

    class LifecycleMachine(RuleBasedStateMachine):
        # The calls that led to the server's death, kept from the sequence that saw it (or,
        # when the next one met it first, the one before): the sequences Hypothesis tries after
        # it (to shrink, or to check the failure replays) meet a dead server and would report
        # only that.
        died: ClassVar[list[str]] = []
        last: ClassVar[list[str]] = []  # the latest finished sequence's calls

        def __init__(self) -> None:
            super().__init__()
            if self.died:
                raise ServerDiedError("the server died in an earlier sequence of this exploration")
            stats["sequences"] += 1
            try:
                put_back_a()
                engine.to_baseline()
            except ServerDiedError:
                self._died(self.last[-1] if self.last else "(before the exploration's first call)")
                raise
            version = None
            if weights is not None:
                version, problems = _version(engine)
                if problems:
                    raise DiscrepancyError("at the start of a sequence: " + "; ".join(problems))
            self.state = model.State(profile=engine.profile, version=version)
            self.requests: dict[int, Generation] = {}
            self.sizes: dict[int, int] = {}  # each request's max_tokens
            self.numbers = itertools.count(1)
            self.history = model.History(engine.server.url)

        # -- calls ---------------------------------------------------------------------------
        @rule(level=st.sampled_from([0, 1, 2]), mode=st.sampled_from([None, "abort", "keep"]))
        def sleep(self, level: int, mode: str | None) -> None:
            self._discards(level)
            self._call(model.sleep(self.state, level, mode), engine.control.sleep(level, mode),
                       f"POST /sleep level={level} mode={mode or 'default'}")

        # A wait-mode drain with requests queued behind a pause never completes (they are not
        # scheduled while paused), so `wait` is drawn only when nothing is held.
        @precondition(lambda self: not self.state.held)
        @rule(level=st.sampled_from([0, 1, 2]))
        def sleep_wait(self, level: int) -> None:
            self._discards(level)
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

        @precondition(lambda self: not (resume_kills and self.state.asleep))
        @rule()
        def resume(self) -> None:
            self._call(model.resume(self.state), engine.control.resume(), "POST /resume")

        @precondition(lambda self: bool(refusals))
        @rule(path=st.sampled_from(refusals or [""]))
        def refused(self, path: str) -> None:
            stats["refused"] = stats.get("refused", 0) + 1
            self._call(model.refused(self.state, path), engine.control.call("POST", path),
                       f"POST {path}")

        @rule()
        def abort_requests(self) -> None:
            self._call(model.abort_all(self.state), engine.control.abort_requests(),
                       "POST /abort_requests")

        @rule()
        def reset_prefix_cache(self) -> None:
            self._call(model.reset_prefix_cache(self.state),
                       engine.control.call("POST", "/reset_prefix_cache"), "POST /reset_prefix_cache")

        @precondition(lambda self: weights is not None and self.state.can_sync)
        @rule(checkpoint=st.sampled_from(["A", "B"]), version=st.sampled_from([None, "v1", "v2"]))
        def sync(self, checkpoint: str, version: str | None) -> None:
            assert weights is not None
            prediction = model.sync(self.state, checkpoint, version)
            label = f"weight sync of checkpoint {checkpoint} (finish version {version})"
            stats["syncs"] = stats.get("syncs", 0) + 1
            loaded["label"] = "?"  # unknown until the session is seen through
            calls = client.try_push(weights.checkpoints[checkpoint], version, weights.engines)
            self.history.sync(f"{label}: " + ", ".join(f"{c.route} {c.status}" for c in calls),
                              [(c.route, c.body, c.status) for c in calls])
            refused = [f"{c.route} answered {c.status}: {str(c.answer)[:200]}" for c in calls if not c.ok]
            if refused:
                self._fail(label, prediction, refused)
            loaded["label"] = checkpoint
            self._judge(prediction, label)

        # The RL step in one draw, its first rollout included (a sync needs a pause first, and
        # a random walk seldom leaves the pause in place and then sends a request).
        @precondition(lambda self: weights is not None and self.state.runnable
                      and len(self.state.held) < MAX_HELD)
        @rule(checkpoint=st.sampled_from(["A", "B"]))
        def rl_step(self, checkpoint: str) -> None:
            self.pause("keep")
            self.sync(checkpoint, f"step-{checkpoint}")
            self.resume()
            self.request()

        # The colocated RL step in one draw, as verl and SkyRL (level 2) or NeMo-RL and
        # OpenRLHF (prefix reset, level 1) run it: the weights wake alone, take the sync, then
        # the KV cache wakes; a random walk seldom strings a partial wake and a sync together.
        @precondition(lambda self: weights is not None and self.state.runnable
                      and len(self.state.held) < MAX_HELD)
        @rule(level=st.sampled_from([1, 2]), checkpoint=st.sampled_from(["A", "B"]))
        def colocated_step(self, level: int, checkpoint: str) -> None:
            if level == 1:
                self.reset_prefix_cache()
            self.sleep(level, None)
            self.wake_up(("weights",))
            self.sync(checkpoint, f"colocated-{checkpoint}")
            self.wake_up(("kv_cache",))
            self.resume()
            self.request()

        @precondition(lambda self: weights is not None)
        @rule(version=st.sampled_from(["u1", "u2"]))
        def update_weight_version(self, version: str) -> None:
            body = {"new_version": version}
            self._call(model.set_weight_version(self.state, version),
                       engine.control.call("POST", "/update_weight_version", json=body),
                       f"POST /update_weight_version {version}", body)

        # Under data parallelism each request is pinned to an engine the draw picks, so every
        # engine holds requests and one that loses, cuts or runs its own is named.
        @precondition(lambda self: len(self.state.held) < MAX_HELD)
        @rule(rank=st.sampled_from(ranks))
        def request(self, rank: int | None = None) -> None:
            number = next(self.numbers)
            prediction = model.arrive(self.state, number, rank)
            prompt = golden.HTTP_PROMPT if weights else f"request {number}"
            # /load counts the held requests and the running ones not yet finished.
            counted = len(prediction.state.held) + sum(
                not self.requests[n].done.is_set() for n in self.state.running)
            gen = engine.gen.start(prompt, tokens, headers=rank_headers(rank))
            self.requests[number], self.sizes[number] = gen, tokens
            self.history.request(number, tokens, engine.server.config.served_model_name, prompt, rank)
            if number in prediction.state.held:
                # Accepted before the next call, or the next call races the arrival.
                wait_until(lambda: gen.done.is_set() or engine.control.load() >= counted, 10)
            self._judge(prediction, f"request {number} arrives")

        # A request that outlives calls, pinned like `request` under data parallelism. It is
        # seen streaming before the next call: a call that finds it still queued would meet
        # a request the engine has not started, whose fate (held, not drained) is another.
        @precondition(lambda self: self.state.runnable and not self.state.admission_closed
                      and len(self.state.running) < MAX_RUNNING)
        @rule(rank=st.sampled_from(ranks))
        def long_request(self, rank: int | None = None) -> None:
            number = next(self.numbers)
            stats["long_requests"] = stats.get("long_requests", 0) + 1
            size = engine.in_flight_tokens(LONG_REQUEST_SECONDS)
            prompt = f"long request {number}"
            gen = engine.gen.start(prompt, size, stream=True, headers=rank_headers(rank))
            self.requests[number], self.sizes[number] = gen, size
            self.history.request(number, size, engine.server.config.served_model_name, prompt, rank)
            within = max(START_WITHIN_S, size / engine.decode_rate())
            if not wait_until(lambda: bool(gen.chunks) or gen.done.is_set(), within):
                raise HarnessError(f"long request {number} ({size} tokens) streamed nothing "
                                   f"within {within:.0f} s of being sent: {gen.summary()}")
            self._judge(model.start(self.state, number, rank), f"long request {number} starts")

        def teardown(self) -> None:
            script = self._death_script()
            self.last[:] = [script]
            try:
                engine.server.ensure_alive()
                engine.to_baseline()
                engine.gen.join_all(engine.request_timeout)
                put_back_a()
            except ServerDiedError:
                self._died(script)
                raise

        def _died(self, script: str) -> None:
            if not self.died:
                self.died.append(script)

        def _death_script(self) -> str:
            """The sequence's calls, ending with the last one sent (the answer never came, or
            came from a server that was already going)."""
            script = self.history.script()
            sent = engine.control.last_sent
            if sent is not None:
                script += (f"\ncurl -s -X {sent[0]} '{engine.server.url}{sent[1]}'"
                           f"  # the last call sent before the server died")
            return script

        def _discards(self, level: int) -> None:
            """A level-2 sleep of resident weights leaves them undefined: A is put back after."""
            if level == 2 and "weights" not in self.state.asleep:
                loaded["label"] = "?"

        # -- judging -------------------------------------------------------------------------
        def _call(self, prediction: model.Prediction, reply: Reply, label: str,
                  body: dict[str, Any] | None = None) -> None:
            # A refusal that must name a word is a 4xx of any code.
            self.history.call(reply.method, reply.path, body,
                              prediction.status if prediction.body_mentions is None else "4xx")
            problems = _reply_problems(prediction, reply)
            if problems:
                self._fail(label, prediction, problems)
            self._judge(prediction, label)

        def _judge(self, prediction: model.Prediction, label: str) -> None:
            stats["steps"] += 1
            problems: list[str] = []
            named = prediction.state.request
            for number in prediction.completes:
                problems += self._end_problems(
                    number, named(number), lambda g, n=number: judges.completion_problems(g, tokens)
                    + self._checkpoint_problems(g, prediction.state.weights, n))
            for number in prediction.aborted:
                problems += self._end_problems(number, named(number),
                                               lambda g: judges.abort_problems(g, tokens))
            for number in prediction.may_abort:
                problems += self._end_problems(number, named(number), lambda g, n=number: model.hit_problems(
                    judges.completion_problems(g, self.sizes[n]), judges.abort_problems(g, self.sizes[n])))
            for number in prediction.drained:
                if not self.requests[number].done.wait(DRAIN_SETTLE_S):
                    problems.append(f"{named(number)} still running {DRAIN_SETTLE_S:g} s after the "
                                    f"drain answered")
                    continue
                problems += self._end_problems(number, named(number), lambda g, n=number:
                                               judges.completion_problems(g, self.sizes[n]))
            for number in prediction.rejected:
                if not self.requests[number].done.wait(REJECT_WITHIN_S):
                    problems.append(f"{named(number)}: no rejection within {REJECT_WITHIN_S:g} s; "
                                    f"the request was held instead")
                    continue
                problems += self._end_problems(number, named(number), judges.rejection_problems)
            after = prediction.state
            watched = (*after.held, *after.running)
            if watched and wait_until(
                    lambda: any(self.requests[n].done.is_set() for n in watched), HOLD_GRACE_S):
                # A running request may end now only in full (else a call quietly ended it).
                running_problems, after = model.judge_running(after, self._ended(after.running))
                problems += running_problems
                ended = self._ended(after.held)
                # Only a finding recorded for this profile, release and platform explains it, and
                # only for a request that ran to its full length; the others stay held.
                ran_problems, finding, after = model.judge_ran_while_held(after, ended, in_scope)
                problems += ran_problems
                if finding is not None:
                    ran = [e.number for e in ended if e.number not in after.held]
                    findings.append(f"{finding}: after '{label}' requests {ran} ran "
                                    f"(asleep {sorted(after.asleep)}, unpaused)")
            observed, disagreements = _observe(engine, after.load_range, engines, weights is not None)
            differences, explained = model.judge_observation(after, observed, in_scope)
            if explained is not None:
                findings.append(f"{explained}: after '{label}' the gauge read {observed.gauge} "
                                f"(asleep {sorted(after.asleep)})")
            problems += differences + disagreements
            if problems:
                self._fail(label, prediction, problems)
            self.state = after

        def _ended(self, numbers: tuple[int, ...]) -> list[model.Ended]:
            """The requests of `numbers` the client saw end, each judged as a full completion."""
            return [model.Ended(n, tuple(judges.completion_problems(self.requests[n], self.sizes[n])),
                                self.requests[n].summary())
                    for n in numbers if self.requests[n].done.is_set()]

        @staticmethod
        def _checkpoint_problems(gen: Generation, checkpoint: str | None, number: int) -> list[str]:
            """A request that ran whole must be the golden output of the checkpoint loaded
            (none after a level-2 sleep discarded it: the output is undefined until a sync)."""
            if (weights is None or checkpoint is None or gen.error is not None
                    or len(gen.token_ids) != tokens):
                return []  # judged by completion_problems(): a request cut short has no full output
            return serves_problems({f"request {number}": gen.token_ids}, checkpoint, weights.goldens,
                                   "ran")

        def _end_problems(self, number: int, name: str,
                          judge: Callable[[Generation], list[str]]) -> list[str]:
            gen = self.requests[number]
            if not gen.done.wait(engine.request_timeout):
                return [f"{name} did not end within {engine.request_timeout:.0f} s"]
            return [f"{name}: {p}" for p in judge(gen)]

        def _fail(self, label: str, prediction: model.Prediction, problems: list[str]) -> None:
            replay = ""
            if save_replay is not None:
                path = save_replay(self.history.replay_script(serve_line(engines, weights),
                                                              prediction.relies_on, prediction.state))
                replay = f"\nreplay it: python {path} URL (a server started as the script says)"
            raise DiscrepancyError(
                f"after '{label}' (model state before: {self.state}):\n  " + "\n  ".join(problems)
                + f"\nthe model relied on: {', '.join(prediction.relies_on)}\n"
                + self.history.script() + replay
            )

    return LifecycleMachine


def _reply_problems(prediction: model.Prediction, reply: Reply) -> list[str]:
    if prediction.body_mentions is not None:
        if 400 <= reply.status < 500 and prediction.body_mentions in str(reply.body).lower():
            return []
        return [f"expected a 4xx naming '{prediction.body_mentions}'; observed {reply.describe()}"]
    ok = reply.status == prediction.status
    # A release before JSON bodies is judged on the status (the shapes: api/reply-bodies).
    if ok and prediction.body is not None and reply.body_in_contract:
        ok = isinstance(reply.body, dict) and all(
            reply.body.get(k, object()) == v for k, v in prediction.body.items())
    if ok:
        return []
    return [f"expected {prediction.status} {prediction.body or ''}; observed {reply.describe()}"]


def _observe(engine: Engine, expected_load: tuple[int, int], engines: int,
             versions: bool = False) -> tuple[model.Observation, list[str]]:
    """What the engine shows, and (several engines) where the engines do not agree."""
    # /load drops when a response has been written, a moment after the client saw it end.
    low, high = expected_load
    wait_until(lambda: low <= engine.control.load() <= high, 2.0)
    version, problems = _version(engine) if versions else (None, [])
    if engines == 1:
        gauge = engine.control.sleep_state()
        return model.Observation(
            is_sleeping=engine.control.is_sleeping(), is_paused=engine.control.is_paused(),
            gauge=tuple(int(v) for v in gauge) if gauge else None,  # type: ignore[arg-type]
            load=engine.control.load(), version=version,
        ), problems
    # Several engines: the flags are consensus queries (a 500 when the engines disagree) and
    # the gauge has one sample per engine label; each must agree before it is compared.
    sleeping = engine.control.call("GET", "/is_sleeping")
    paused = engine.control.call("GET", "/is_paused")
    disagreements = [f"the engines gave no common answer: {r.describe()}"
                     for r in (sleeping, paused) if r.status != 200] + problems
    gauges = tj.gauges(engine.control.metrics_text(), engines)
    gauge = tj.common_gauge(gauges)
    if gauge is None:
        disagreements.append(f"vllm:engine_sleep_state differs between engines: {gauges}")
    return model.Observation(
        is_sleeping=bool(sleeping.body.get("is_sleeping")) if sleeping.status == 200 else False,
        is_paused=bool(paused.body.get("is_paused")) if paused.status == 200 else False,
        gauge=gauge,  # type: ignore[arg-type]
        load=engine.control.load(), version=version,
    ), disagreements


def _cap_shrinking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hypothesis shrinks for up to 5 minutes; on a live server each attempt costs real calls.
    Its cap is internal, so it is lowered only where it exists under that name."""
    from hypothesis.internal.conjecture import engine as conjecture

    if isinstance(getattr(conjecture, "MAX_SHRINKING_SECONDS", None), int):
        monkeypatch.setattr(conjecture, "MAX_SHRINKING_SECONDS", SHRINK_SECONDS)


@pytest.mark.behaviour("exploration/reference-model")
def test_reference_model(sync_checkpoints, engine, run_state, request, record_property, monkeypatch):
    explore(engine, 1, run_state.config.explore_examples, run_state, request, record_property,
            monkeypatch, sync_checkpoints)


@pytest.mark.behaviour("topology/reference-model")
@pytest.mark.topologies("dp2")
def test_reference_model_on_every_engine(sync_checkpoints, topology_engine, topology, run_state, request,
                                         record_property, monkeypatch):
    explore(topology_engine, topology.engines, run_state.config.topology_explore_examples,
            run_state, request, record_property, monkeypatch, sync_checkpoints)


def exploration_weights(sync_checkpoints: tuple[dict[str, Checkpoint], dict[str, list[int]]] | str,
                        applicable: str | None, engines: int) -> tuple[Weights | None, str]:
    """The weights the exploration syncs, or why it does not: the suite cannot sync here (another
    model, an external target) or the release predates the session the syncs need."""
    if isinstance(sync_checkpoints, str):
        return None, f"no weight syncs: {sync_checkpoints}"
    if applicable:
        return None, f"no weight syncs: {applicable}"
    checkpoints, goldens = sync_checkpoints
    return Weights.of(checkpoints, goldens, engines), ""


def run_machine(machine: type[RuleBasedStateMachine], budget: settings) -> None:
    """Run the exploration; a server that died during it is reported with the calls that led
    there (the outcome hook makes it the engine's failure where its log reports the death, an
    error otherwise), not as whatever Hypothesis made of the sequences after it."""
    try:
        run_state_machine_as_test(machine, settings=budget)
    except Exception as exc:
        died = getattr(machine, "died", [])
        if died:
            raise ServerDiedError(f"the server died while exploring; the calls that led there:\n"
                                  f"{died[0]}") from exc
        raise


def explore(engine: Engine, engines: int, examples: int, run_state, request, record_property,
            monkeypatch, sync_checkpoints) -> None:
    suite = run_state.config
    _cap_shrinking(monkeypatch)
    findings: list[str] = []
    stats = {"sequences": 0, "steps": 0, "syncs": 0, "long_requests": 0, "refused": 0}
    left_out = ""
    needed = "weights/sync-reaches-every-rank" if engines > 1 else "weights/sync-lands"
    weights, no_syncs = exploration_weights(
        sync_checkpoints, run_state.catalog[needed].applicable(
            run_state.target.vllm_version if run_state.target else None), engines)
    # One database per profile and engine count: a sequence saved under another model or
    # topology is no example for this one.
    database = DirectoryBasedExampleDatabase(
        str(suite.report_dir.parent / "hypothesis-db" / f"{engine.profile}-{engines}-engine"))
    budget = settings(
        max_examples=examples, stateful_step_count=suite.explore_steps,
        deadline=None, database=database, print_blob=True,
        suppress_health_check=list(HealthCheck),
        # Hypothesis's explain phase replays the shrunk sequence with its parts varied, each
        # replay real calls on the live server, to annotate the test code's lines; the curl
        # lines of the reproduction already say what failed.
        phases=[p for p in settings.default.phases if p is not Phase.explain],
    )
    try:
        instance = Instance(profile=engine.profile, variant=engine.variant.name, transport="http",
                            release=run_state.target.vllm_version if run_state.target else None,
                            platform=run_state.target.platform if run_state.target else None)

        def in_scope(behaviour: str) -> bool:
            return finding_reached(run_state.expectations, behaviour, instance)

        killer = model.kills_data_parallel(engines, in_scope)
        if killer is not None:
            left_out = RESUME_ASLEEP_NOTE.format(engines=engines, finding=killer)
        def save_replay(text: str) -> str:
            path = suite.report_dir / "exploration" / f"replay-{engine.profile}-{engines}-engine.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return str(path)

        run_machine(build_machine(engine, findings, stats, in_scope, engines, weights, save_replay), budget)
    finally:
        reached = sorted(set(findings))
        record_property("findings_reached", reached)
        record_property("explored", stats)
        run_state.record_exploration(request.node.nodeid, reached, stats)
        run_state.add_notes(request.node.nodeid, *(n for n in (left_out, no_syncs) if n))
