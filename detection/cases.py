"""The detection self-test, as data and pure judgement: which runs to make, and what they mean.

A case runs a slice of the suite against the target with one fault (or none) armed. Its
``expect_fail`` behaviours must fail as failures; every other behaviour of the slice must
pass. `judge` turns one run's results records into a row of the detection matrix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixtures.axes.topologies import TOPOLOGIES
from fixtures.spec.catalog import Catalog
from fixtures.spec.record import Record
from vllm_lifecycle.faults import registry
from vllm_lifecycle.faults.registry import FAULTS

CAUGHT, MISSED, CLEAN, COLLATERAL, BROKEN = "caught", "missed", "clean", "collateral", "error"
# A behaviour the fault must break failed, but not for the fault's symptom: no catch.
WRONG_CAUSE = "wrong-cause"


@dataclass(frozen=True)
class Case:
    name: str
    fault: str | None
    behaviours: tuple[str, ...]  # the slice: behaviour IDs run
    expect_fail: tuple[str, ...]
    profile: str | None = None
    # Narrows the slice's instances (pytest -k) where only some parameters touch the fault.
    keyword: str | None = None
    summary: str = ""
    extra_args: tuple[str, ...] = ()
    # A caught failure's message must contain this (e.g. the shrunk reproduction).
    evidence: str | None = None
    # http: `vllm serve`; offline: the Python API through the suite's engine host.
    transport: str = "http"
    # expect_fail behaviour -> the regular expression every failing instance's message must
    # contain (searched, DOTALL) for the failure to count as this case's catch.
    symptoms: Mapping[str, str] = field(default_factory=dict)
    # The topologies its slice runs on (None: every one its behaviours declare).
    topologies: tuple[str, ...] | None = None

    def pytest_args(self) -> list[str]:
        args = ["--lifecycle-behaviours", ",".join(self.behaviours),
                "--lifecycle-transports", self.transport]
        if self.topologies:
            args += ["--lifecycle-topologies", ",".join(self.topologies)]
        if self.fault:
            args += ["--lifecycle-fault", self.fault]
        if self.profile:
            args += ["--lifecycle-profile", self.profile]
        keyword = f"({self.keyword}) and not {GPU_ONLY}" if self.keyword else f"not {GPU_ONLY}"
        return [*args, "-k", keyword, *self.extra_args]


# Instances that need CUDA (vLLM's own ipc/nccl trainer): on the CPU engine detection runs on they
# skip, and a skip in a slice makes the case broken, so every slice leaves them out.
GPU_ONLY = "vllm-trainer"


# The misuse instances with requests in flight or held (conformance/misuse), and the guards.
WITH_WORK = "with-work or then or streaming or held or awake_baseline or pause_resume"

# Instances that exercise a fault, where a behaviour's other parameters cannot see it.
_KEYWORDS = {
    "keep-aborts": "keep or awake_baseline or pause_resume",
    "wait-skips-drain": "wait or drain or awake_baseline or pause_resume",
    # Only AsyncLLM has per-request output collectors, and only deltas are merged in them.
    "buffered-delta-dropped": "AsyncLLM-MP1 and (delta or full_wake)",
    # The held request across a sync runs only on AsyncLLM; one engine of each API is enough.
    "weights-version-label-frozen": "(AsyncLLM-MP1 or (LLM-MP0 and not AsyncLLM)) and (spans or full_wake)",
    # Its one test, so that it narrows a merged case as it does alone.
    "weights-lora-slots-stale": "lora_follows_sync",
    # Its slice as it stands, named, so that it narrows a merged case as it does alone.
    "partial-wake-resumes": "partial_wake or awake_baseline or pause_resume",
    # Only a keep pause or a keep sleep reaches it.
    "dp-keep-aborts-one-rank": "keep",
    # Every mode shows it the same way, and each failed instance costs a dp2 restart: the keep
    # pause is enough (its symptom is the plainest: the ranks kept working).
    "dp-pause-completes-before-consensus": "keep",
    # Its one test, so that it narrows a merged case as it does alone.
    "weights-sync-first-engine-only": "sync_reaches",
    # The work-in-flight faults: only the instances with requests in flight or held see them.
    **{name: WITH_WORK for name in ("noop-resume-aborts", "unknown-tag-wake-aborts", "repeat-pause-aborts",
                                    "refused-release-aborts", "route-refusal-aborts")},
}

# partial-wake-resumes on every data-parallel engine: a case of its own, merged with others on dp2.
DP2_PARTIAL_WAKE = "dp2-partial-wake-resumes"
# weights-dp-reads-entry-0 on the tensor-parallel workers of one engine: a case of its own on tp2.
TP2_ENTRY_0 = "tp2-reads-entry-0"

# The topologies a case runs on, where its behaviours declare more than its fault needs: the
# single-engine custody faults are proven on one engine (a dp2 server would cost a start and the
# whole machine), the per-rank one on dp2 alone (with one engine the fault never fires). The
# partial wake is proven on one engine here, on dp2 by DP2_PARTIAL_WAKE.
_TOPOLOGIES = {"keep-aborts": ("single",), "wait-skips-drain": ("single",),
               "partial-wake-resumes": ("single",),
               "late-arrival-dropped": ("single",), "dp-keep-aborts-one-rank": ("dp2",),
               # The per-engine sync faults on dp2 (the sync runs on tp2 too); entry 0 on tp2 is
               # TP2_ENTRY_0's.
               **{name: ("dp2",) for name in ("weights-sync-first-engine-only", "weights-dp-reads-entry-0",
                                              "weights-init-first-engine-only")},
               "weights-version-cached-per-frontend": ("api2",),
               "frontend-stale-pause": ("api2", "single"),
               # misuse/sleep-while-asleep runs on dp2 and api2 too; the stale flag shows on one.
               "sleep-flag-stale": ("single",),
               # One engine: the refusals and no-ops act alike on every engine and API server.
               **{name: ("single",) for name in ("noop-resume-aborts", "unknown-tag-wake-aborts",
                                                 "repeat-pause-aborts", "refused-release-aborts",
                                                 "route-refusal-aborts")}}

# Cases merged into one (one server or host start instead of one each): each member's fault
# patches its own functions and breaks its own behaviours, judged by its own symptom. Each group
# was run on the real engine and every member caught (docs/faults.md); a fault that leaves the
# engine dead is merged only with faults whose tests run before its own, and a fault
# never meets the tests it breaks of another (partial-wake-resumes schedules onto a reload still
# on meta after a sync while asleep, wait-skips-drain cuts the drain buffered-delta-dropped is
# judged on, and a sync's resume kills the engine while dp-pause-completes-before-consensus is
# armed). A dp2 fault whose failure wedges the server
# pairs with a dp2 sync fault: its test is marked ends_shared_server_on_failure, so the sync's
# test runs first on the same server and the wedge costs no start the pair would not pay apart.
_TOGETHER: dict[str, tuple[str, ...]] = {
    "weights-bookkeeping": ("weights-finish-without-session", "weights-checker-blind",
                            "weights-update-counted-twice", "weights-held-span-keeps-label",
                            "weights-session-leaks"),
    # A lost tensor leaves a layer on meta and the engine dies at the next request: its sync
    # tests (conformance/weights) run after the sleep faults' (flags, mechanism, metrics, misuse)
    # on the server they share, in the suite's order (selftests/test_detection_lanes.py).
    "side-effects-and-lost-tensor": ("rss-leak-per-cycle", "sleep-op-recorder-skips-failures",
                                     "sleep-flag-stale", "weights-sync-drops-a-tensor"),
    "wake-and-admission": ("wake-perturbs-weights", "double-sleep-500", "late-arrival-dropped"),
    "weights-state": ("weights-finish-resumes", "weights-abort-pause-keeps-requests",
                      "weights-chunk-dtype-reinterpreted"),
    "gauge-and-stale-kv": ("gauge-not-updated", "weights-keep-pause-stale-kv"),
    # Both API-server caches on one api2 server.
    "frontend-caches": ("frontend-stale-pause", "weights-version-cached-per-frontend"),
    # On dp2 (alone on the machine): the custody fault keeps the engine healthy for the sync; the
    # partial wake's held requests mostly run and end before a full wake restores the engine,
    # and sometimes wedge it (registry.RAN_OR_WEDGED_ON_DP): the wedged server is stopped, and the
    # sync test after it starts a fresh one.
    "dp-keep-sync-and-partial-wake": ("dp-keep-aborts-one-rank", "weights-sync-first-engine-only",
                                      DP2_PARTIAL_WAKE),
    "dp-stale-wave-and-init": ("dp-stale-wave-wakes-paused", "weights-init-first-engine-only"),
    "dp-wake-and-entry-0": ("dp-wake-reaches-one-rank", "weights-dp-reads-entry-0"),
    # Requests left alone by no-op, repeated and refused calls: five functions, one server.
    "work-in-flight": ("noop-resume-aborts", "unknown-tag-wake-aborts", "repeat-pause-aborts",
                       "refused-release-aborts", "route-refusal-aborts"),
    # A weights-only wake's gating, and a wait sleep's drain (each test sleeps with the other's
    # call left alone: no partial wake in the drains, no wait sleep in the wakes).
    "partial-wake-and-drain": ("partial-wake-resumes", "wait-skips-drain"),
    # Custody of a keep pause, and an adapter across a sync (its test pauses with no request in
    # flight, on a LoRA server of its own).
    "keep-aborts-and-lora": ("keep-aborts", "weights-lora-slots-stale"),
    # The Python API: the same hosts once instead of once per member.
    "offline-partial-wake-and-drain": ("offline-partial-wake-resumes", "offline-wait-skips-drain"),
    "offline-weights-finish-and-label": ("offline-weights-finish-resumes",
                                         "weights-version-label-frozen"),
    "offline-late-arrival-deltas-release": ("offline-late-arrival-dropped", "buffered-delta-dropped",
                                            "offline-refused-release-aborts"),
}

# Faults whose catch leaves the engine dead (the next request kills it): merged only with faults
# whose tests run before their own (selftests/test_detection_lanes.py checks the order).
KILLS_THE_ENGINE = ("weights-sync-drops-a-tensor",)

# Faults that wedge an engine (a DP resume waits forever for the rank a wake skipped, a rank
# woken while paused waits forever in an all-reduce): a short request timeout turns each hang
# into a failure in seconds instead of the default timeout's minutes.
_EXTRA_ARGS = {"dp-wake-reaches-one-rank": ("--lifecycle-request-timeout", "15"),
               "dp-stale-wave-wakes-paused": ("--lifecycle-request-timeout", "15")}

# Stock vLLM judged by the layered profile: an un-paused sleep accepted (one engine and dp2), a
# request arriving during a pause held instead of rejected, and the dp2 exploration differing at
# either.
UNPAUSED_SLEEP_DONE = r"un-paused sleep must be refused .*; observed POST /sleep\?level=1 -> 200\b"
HELD_NOT_REJECTED = r"no rejection within .*the request was held instead"
LAYERED_DISCREPANCY = (r"expected a 4xx naming 'pause'; observed POST /sleep\S* -> 200\b"
                       r"|expected a 503 'Generation is paused"
                       r"|no rejection within \S+ s; the request was held instead"
                       # a paused sleep in the default mode aborts a long request layered keeps
                       r"|ended while the model has it running")


def cases(variant: str = "MRV1-eager") -> list[Case]:
    """One case per fault, the layered preview, and stock vLLM judged by the layered profile."""
    out = []
    for fault in FAULTS.values():
        if fault.kind != "fault":
            continue
        keyword = _KEYWORDS.get(fault.name)
        out.append(Case(
            name=fault.name, fault=fault.name,
            behaviours=tuple(dict.fromkeys(fault.breaks + fault.guards)),
            expect_fail=fault.breaks,
            keyword=f"{variant} and ({keyword})" if keyword else variant,
            summary=fault.summary, transport=fault.transport, symptoms=dict(fault.symptoms),
            extra_args=_EXTRA_ARGS.get(fault.name, ()), topologies=_TOPOLOGIES.get(fault.name),
        ))
    preview = FAULTS["layered"]
    out.append(Case(
        name="preview-layered", fault=preview.name, behaviours=preview.guards, expect_fail=(),
        profile=preview.profile, keyword=variant, topologies=("single",),
        summary="the layered contract (RFC #51476 §4, PR #53082) previewed on the real engine",
    ))
    # Stock vLLM under the layered profile, in two cases: its one-engine tests run side by side
    # with the other single-engine cases; only the dp2 ones take the machine to themselves.
    out.append(Case(
        name="stock-under-layered-one-engine", fault=None,
        behaviours=("custody/refuse-unpaused-sleep", "custody/late-arrival", "flags/awake-baseline"),
        expect_fail=("custody/refuse-unpaused-sleep", "custody/late-arrival"),
        profile="layered", keyword=variant, topologies=("single",),
        summary="stock vLLM judged by the layered profile on one engine: the tentative tests must fail",
        symptoms={"custody/refuse-unpaused-sleep": UNPAUSED_SLEEP_DONE,
                  "custody/late-arrival": HELD_NOT_REJECTED},
    ))
    dp2_layered = ("custody/late-arrival", "topology/layered-sleep-every-rank", "topology/reference-model")
    out.append(Case(
        name="stock-under-layered-dp2", fault=None, behaviours=dp2_layered, expect_fail=dp2_layered,
        profile="layered", keyword=variant, topologies=("dp2",),
        # The catch needs no minimal reproduction: the dp2 exploration skips its shrink. It
        # keeps the budget it had before the dp2 default dropped to 2 (it stops at the first
        # discrepancy, so the budget costs only when none is found).
        extra_args=("--hypothesis-profile", "lifecycle-no-shrink",
                    "--lifecycle-topology-explore-examples", "20"),
        summary="stock vLLM judged by the layered profile on dp2: the tentative tests must fail",
        symptoms={"custody/late-arrival": HELD_NOT_REJECTED,
                  "topology/layered-sleep-every-rank": UNPAUSED_SLEEP_DONE,
                  "topology/reference-model": LAYERED_DISCREPANCY},
    ))
    # The same fault on every data-parallel engine: one request pinned to each runs while held.
    out.append(Case(
        name=DP2_PARTIAL_WAKE, fault="partial-wake-resumes",
        behaviours=("gating/partial-wake-holds-requests",),
        expect_fail=("gating/partial-wake-holds-requests",),
        keyword=f"{variant} and partial_wake", topologies=("dp2",),
        # The ranks wedge in about half the runs (RAN_OR_WEDGED_ON_DP): the unanswered full wake
        # waits out this timeout, not the default's two minutes (custody's requests take seconds).
        extra_args=("--lifecycle-request-timeout", "30"),
        summary="on dp2: a weights-only wake resumes scheduling on every engine",
        symptoms={"gating/partial-wake-holds-requests": registry.RAN_OR_WEDGED_ON_DP},
    ))
    # Entry 0 read by every worker of one engine: TP1 loads TP0's entry.
    entry_0 = FAULTS["weights-dp-reads-entry-0"]
    out.append(Case(
        name=TP2_ENTRY_0, fault=entry_0.name, behaviours=entry_0.breaks, expect_fail=entry_0.breaks,
        keyword=f"{variant} and sync_reaches", topologies=("tp2",),
        summary="on tp2: every tensor-parallel worker loads the first entry of a per-worker update_info list",
        symptoms=dict(entry_0.symptoms),
    ))
    out.append(Case(
        name="exploration-partial-wake-resumes", fault="partial-wake-resumes",
        behaviours=("exploration/reference-model",), expect_fail=("exploration/reference-model",),
        keyword=variant, extra_args=("--lifecycle-explore-examples", "25", "--hypothesis-seed", "1"),
        evidence=REPRODUCTION_MARK,
        summary="the model-based exploration finds a fault on its own and shrinks it to curl lines",
        symptoms={"exploration/reference-model": EXPLORATION_SYMPTOM},
    ))
    out.append(Case(
        name="exploration-noop-resume-aborts", fault="noop-resume-aborts",
        behaviours=("exploration/reference-model",), expect_fail=("exploration/reference-model",),
        # Shrinking is exploration-partial-wake-resumes' to show; the catch alone needs none.
        keyword=variant, extra_args=("--lifecycle-explore-examples", "25", "--hypothesis-seed", "1",
                                     "--hypothesis-profile", "lifecycle-no-shrink"),
        evidence=REPRODUCTION_MARK,
        summary="the exploration catches a no-op resume that ends a long request spanning calls",
        symptoms={"exploration/reference-model": EXPLORATION_RUNNING_ENDED},
    ))
    # The offline tests can fail too: the same engine faults, armed in the engine host.
    out.append(Case(
        name="offline-partial-wake-resumes", fault="partial-wake-resumes",
        behaviours=("flags/partial-wake", "gating/partial-wake-holds-requests"),
        expect_fail=("flags/partial-wake", "gating/partial-wake-holds-requests"),
        keyword=f"{variant} and weights-first and ((LLM-MP0 and not AsyncLLM) or AsyncLLM-MP1)",
        transport="offline", topologies=("single",),
        summary="through LLM (in-process) and AsyncLLM: a weights-only wake resumes scheduling",
        symptoms={"flags/partial-wake": registry.PARTIAL_WAKE_RESUMED,
                  "gating/partial-wake-holds-requests": registry.RAN_WHILE_HELD},
    ))
    out.append(Case(
        name="offline-late-arrival-dropped", fault="late-arrival-dropped",
        behaviours=("custody/async-late-arrival",), expect_fail=("custody/async-late-arrival",),
        keyword=f"{variant} and AsyncLLM-MP1", transport="offline", topologies=("single",),
        summary="through AsyncLLM: a request submitted during pause_generation is aborted, not held",
        symptoms={"custody/async-late-arrival": r"was not held while paused"},
    ))
    out.append(Case(
        name="offline-refused-release-aborts", fault="refused-release-aborts",
        behaviours=("misuse/release-kv-needs-pause",), expect_fail=("misuse/release-kv-needs-pause",),
        keyword=f"{variant} and AsyncLLM-MP1 and streaming", transport="offline", topologies=("single",),
        summary="through AsyncLLM: a refused release_kv_cache_memory() aborts the request in flight",
        symptoms={"misuse/release-kv-needs-pause": OFFLINE_RELEASE_ABORTED},
    ))
    out.append(Case(
        name="offline-wait-skips-drain", fault="wait-skips-drain",
        behaviours=("custody/drain-before-offload",), expect_fail=("custody/drain-before-offload",),
        # Level 2 skips through the Python API (capabilities.DEEP_DRAIN): a skip breaks a slice.
        # The fault is the engine core's, which LLM reaches the same way: AsyncLLM's host alone
        # (an LLM host of its own would cost the merged case a third start).
        keyword=f"{variant} and AsyncLLM-MP1 and not level2",
        transport="offline",
        summary="through AsyncLLM (multiprocess): sleep(mode='wait') cuts the request",
        symptoms={"custody/drain-before-offload": OFFLINE_DRAIN_CUT},
    ))
    out.append(Case(
        name="offline-weights-finish-resumes", fault="weights-finish-resumes",
        behaviours=("weights/sync-leaves-state", "flags/full-wake"),
        expect_fail=("weights/sync-leaves-state",),
        # AsyncLLM is held by a keep pause, LLM by a sleep: one engine of each API (the other
        # holds skip there).
        keyword=(f"{variant} and (((AsyncLLM-MP1-paused or (LLM-MP0-asleep and not AsyncLLM)) and "
                 f"leaves_state) or ((AsyncLLM-MP1 or (LLM-MP0 and not AsyncLLM)) and full_wake))"),
        transport="offline",
        summary="through AsyncLLM and LLM: finish_weight_update resumes the scheduler",
        symptoms={"weights/sync-leaves-state": registry.FINISH_RESUMED},
    ))
    merged = _merged(out, variant)
    return sorted(merged, key=lambda c: LONGEST.index(c.name) if c.name in LONGEST else len(LONGEST))


# The cases .ci/run runs (`pytest detection --detection-smoke`): one merged case per transport,
# side by side, so every commit proves the machinery end to end on the real engine (faults armed
# in the API server, engine core and workers, and in the Python API's host; the lanes; the
# judging by symptom) in about one server start. `tox -e detection` runs every case
# (docs/faults.md: when to run it).
SMOKE = ("work-in-flight", "offline-late-arrival-deltas-release")

# The side-by-side cases that take longest (two server starts each, or the exploration's search
# and shrink) go first, so the lanes end together instead of one waiting on a long last case
# (docs/benchmarks.md, "CI runs a detection smoke; the full matrix measured").
LONGEST = ("keep-aborts-and-lora", "exploration-partial-wake-resumes", "frontend-caches",
           "offline-weights-finish-and-label")


def _merged(singles: list[Case], variant: str) -> list[Case]:
    """`singles` with each _TOGETHER group replaced by one case, where its first member stood."""
    by_name = {c.name: c for c in singles}
    first = {members[0]: name for name, members in _TOGETHER.items()}
    grouped = {m for members in _TOGETHER.values() for m in members}
    out = []
    for case in singles:
        if case.name in first:
            name = first[case.name]
            out.append(_together(name, [by_name[m] for m in _TOGETHER[name]], variant))
        elif case.name not in grouped:
            out.append(case)
    return out


def _together(name: str, members: list[Case], variant: str) -> Case:
    """One case arming every member's fault at once: the union of their slices, each broken
    behaviour judged by its own member's symptom, each member's instances narrowed as alone."""
    faults = registry.get_faults(",".join(str(c.fault) for c in members))  # one owner per function
    breaks = [b for c in members for b in c.expect_fail]
    if len(set(breaks)) != len(breaks) or len({c.transport for c in members}) != 1:
        raise ValueError(f"{name}: cases merged must break distinct behaviours over one transport")
    narrowings = list(dict.fromkeys((c.keyword or variant).removeprefix(variant).removeprefix(" and ")
                                    for c in members))
    keyword = (variant if "" in narrowings
               else f"{variant} and (" + " or ".join(f"({n})" for n in narrowings) + ")")
    # The members' own topologies; one with none of its own runs on theirs.
    topologies = tuple(dict.fromkeys(t for c in members for t in c.topologies or ())) or None
    return Case(
        name=name, fault=",".join(f.name for f in faults),
        behaviours=tuple(dict.fromkeys(b for c in members for b in c.behaviours)),
        expect_fail=tuple(breaks), keyword=keyword, transport=members[0].transport,
        topologies=topologies, summary="; ".join(c.summary for c in members),
        symptoms={b: s for c in members for b, s in c.symptoms.items()},
        extra_args=tuple(dict.fromkeys(a for c in members for a in c.extra_args)),
    )


def engines_needed(case: Case, catalog: Catalog) -> int:
    """The most engine workers any server of the case's slice runs (dp2, tp2: two), so the most
    CPU cores (one per worker) it needs to itself. A behaviour the catalog does not know counts as 1:
    the child run reports it as outside the catalog."""
    per_topology = {t.name: t.workers for t in TOPOLOGIES}
    needed = [per_topology[t] for b in case.behaviours if b in catalog.behaviours
              for t in catalog.behaviours[b].topologies
              if case.topologies is None or t in case.topologies]
    return max(needed, default=1)


@dataclass(frozen=True)
class Schedule:
    """When each case runs: first, one at a time on every core, the cases a single core cannot
    serve (a DP server wants a core per rank); then the rest, each on one core of its own,
    `lanes` of them side by side, each lane taking the next case as it frees."""

    alone: tuple[Case, ...]
    side_by_side: tuple[Case, ...]
    lanes: int


def schedule(case_list: Iterable[Case], catalog: Catalog, lanes: int) -> Schedule:
    """With one lane every case runs alone, in order; with more, the cases needing more than
    one engine run alone first and the rest side by side, in their order."""
    if lanes < 1:
        raise ValueError(f"lanes must be at least 1, got {lanes}")
    ordered = tuple(case_list)
    if lanes == 1:
        return Schedule(alone=ordered, side_by_side=(), lanes=1)
    alone = tuple(c for c in ordered if engines_needed(c, catalog) > 1)
    return Schedule(alone=alone, side_by_side=tuple(c for c in ordered if c not in alone),
                    lanes=lanes)


REPRODUCTION_MARK = "# reproduction"
# The exploration's discrepancy after a weights-only wake (the fault partial-wake-resumes).
EXPLORATION_SYMPTOM = r"wake_up\?tags=weights"
# A long request ended by a call the model says leaves it running (the fault noop-resume-aborts).
EXPLORATION_RUNNING_ENDED = r"ended while the model has it running .*finish reasons \['abort'\]"
OFFLINE_DRAIN_CUT = r"abort"
# The request in flight across the refused release ended with 'abort' (delivery's wording).
OFFLINE_RELEASE_ABORTED = r"the request in flight: finish reason 'abort', expected 'length'"


@dataclass(frozen=True)
class Row:
    case: str
    cells: Mapping[str, str]  # behaviour -> caught | missed | clean | collateral | error
    details: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c in (CAUGHT, CLEAN) for c in self.cells.values())

    def problems(self) -> list[str]:
        return [f"{b}: {c}" + (f" ({self.details[b]})" if b in self.details else "")
                for b, c in self.cells.items() if c not in (CAUGHT, CLEAN)]

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "ok": self.ok, "cells": dict(self.cells),
                "details": dict(self.details)}


def _behaviour_outcome(outcomes: Iterable[str]) -> str:
    """One behaviour's instances reduced to passed / failed / broken."""
    seen = set(outcomes)
    if not seen or seen & {"error", "skip", "notrun"}:
        return "broken"
    if "fail" in seen:
        return "failed"
    if seen <= {"pass", "tentative-pass", "finding-fixed"}:
        return "passed"
    return "broken"  # tentative-fail / finding: a slice must not contain non-gating instances


def judge(case: Case, records: Sequence[Record]) -> Row:
    by_behaviour: dict[str, list[Record]] = {b: [] for b in case.behaviours}
    extra = []
    for record in records:
        bid = record.behaviour
        if bid in by_behaviour:
            by_behaviour[bid].append(record)
        elif bid:
            extra.append(bid)
    cells: dict[str, str] = {}
    details: dict[str, str] = {}
    for bid, recs in by_behaviour.items():
        outcome = _behaviour_outcome(r.outcome for r in recs)
        expected_fail = bid in case.expect_fail
        if outcome == "broken":
            cells[bid] = BROKEN
            details[bid] = "; ".join(f"{r.outcome}: {r.message[:200]}" for r in recs
                                     if r.outcome not in ("pass", "fail")) or "no instance ran"
        elif expected_fail:
            cells[bid] = CAUGHT if outcome == "failed" else MISSED
            failing = [r.message for r in recs if r.outcome == "fail"]
            symptom = case.symptoms.get(bid)
            if cells[bid] == CAUGHT and symptom is None:
                cells[bid] = BROKEN
                details[bid] = "the case declares no symptom for this behaviour"
            elif cells[bid] == CAUGHT:
                wrong = [m for m in failing if not re.search(symptom or "", m, re.DOTALL)]
                if wrong:
                    cells[bid] = WRONG_CAUSE
                    details[bid] = (f"{len(wrong)} of {len(failing)} failures lack the symptom "
                                    f"{symptom!r}: " + " | ".join(m[:300] for m in wrong[:3]))
            if cells[bid] == CAUGHT and case.evidence and not any(case.evidence in m for m in failing):
                cells[bid] = BROKEN
                details[bid] = f"failed without the expected evidence {case.evidence!r}"
        else:
            cells[bid] = CLEAN if outcome == "passed" else COLLATERAL
        if cells[bid] in (MISSED, COLLATERAL):
            details[bid] = "; ".join(f"{r.nodeid.split('::')[-1]} {r.outcome}" for r in recs)
    for bid in sorted(set(extra)):
        cells[bid], details[bid] = BROKEN, "ran outside the case's slice"
    return Row(case.name, cells, details)


def matrix_markdown(rows: list[Row], case_list: list[Case]) -> str:
    summaries = {c.name: c for c in case_list}
    lines = ["# Detection matrix", "",
             "Each row arms one fault (or none) in the real engine and runs the behaviours it "
             "concerns. `caught`: every failure of an expected-to-fail behaviour shows the fault's "
             "symptom (its message matches the case's signature). `clean`: a guard passed. "
             "`missed`, `wrong-cause` (failed, but not for the fault's symptom) and `collateral` "
             "fail the self-test, as does `error`.", "",
             "| case | fault | profile | behaviour | result |", "|---|---|---|---|---|"]
    for row in rows:
        case = summaries[row.case]
        for bid, cell in row.cells.items():
            lines.append(f"| {row.case} | {case.fault or 'none'} | {case.profile or 'auto'} "
                         f"| {bid} | {cell} |")
    lines.append("")
    bad = [f"- {r.case}: {'; '.join(r.problems())}" for r in rows if not r.ok]
    lines += ["All faults caught, no collateral." if not bad else "Problems:", *bad, ""]
    return "\n".join(lines)
