"""Each fault's symptom, per behaviour it breaks, against the failure messages of that behaviour.

A symptom is what the detection judge (detection/cases.py) takes as proof that the fault, not
something else, failed the test. So it must match the message the fault's effect produces and
none of the other failures the behaviour's test can report. The messages are built with the
pure judges on hand-made observations the fault produces; where a test writes the message
itself, its template is quoted here (the test file named beside it).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pytest

from conformance.metrics import test_sleep_ops as sleep_ops
from fixtures.judging import custody, delivery, judges, with_work
from fixtures.judging import topology_judges as tj
from fixtures.judging import weight_judges as wj
from fixtures.judging.assertions import held_problems, hold_problems
from fixtures.judging.protocol_judges import answer_problems, state_problems
from fixtures.observing.client import Generation, Reply
from fixtures.observing.engine import AWAKE_GAUGE, SLEEP_GAUGE, StateView
from fixtures.observing.flights import Flight
from fixtures.observing.offline import Called
from fixtures.observing.sync_state import Seen, StateSnapshot
from fixtures.observing.weight_sync import WeightCall
from fixtures.protocol.generation import Hold, HoldSample, Outcome
from fixtures.protocol.parts import Answer, State
from thresholds import judges as measured
from thresholds import load_limits
from vllm_lifecycle.faults.registry import FAULTS

LIMITS = load_limits()
CAST_GOLDENS = {"A": [1] * 8, "B-float16": [2] * 8}
# conformance/weights/test_lora_across_sync.py's labels: each checkpoint, with and without the adapter
LORA_GOLDENS = {"A": [1] * 8, "A with the adapter": [3] * 8, "B": [2] * 8, "B with the adapter": [4] * 8}
AWAKE = StateView(False, False, AWAKE_GAUGE)
PAUSED = StateView(True, True, AWAKE_GAUGE)


def asleep(level: int) -> StateView:
    return StateView(True, True, SLEEP_GAUGE[level])


def gen(finish: str | None = "length", tokens: int | None = 8, chunks: int = 0,
        error: BaseException | None = None, ended: bool = True) -> Generation:
    """What the client saw of one request."""
    seen = Generation(stream=chunks > 0, max_tokens=8, completion_tokens=tokens, error=error,
                      finish_reasons={} if finish is None else {0: finish})
    seen.chunks = [(0.05 * (i + 1), "x") for i in range(chunks)]
    if ended:
        seen.ended = 0.3
    return seen


PAUSED_FLAGS = {"/is_sleeping": True, "/is_paused": True, "the sleep-state gauge": AWAKE_GAUGE}


def held_snapshot(paused: str | None, held: bool, late: int = 1) -> StateSnapshot:
    """Held by the caller: the flags as read (`paused`: the name is_paused is read by, None where
    the API has none), a request held at 40 tokens when `held`, `late` unanswered arrivals."""
    flags: dict[str, object] = {"is_sleeping()": True} if paused is None else (
        {**PAUSED_FLAGS, paused: True} if paused.startswith("/") else {"is_sleeping()": True, paused: True})
    return StateSnapshot(flags, (Seen("in-flight", 40),) if held else (),
                         tuple(Seen(f"late-{i}", 0) for i in range(late)))


def finish_resumed(paused: str | None, held: bool, arrival_tokens: int = 3) -> list[str]:
    """weights-finish-resumes: after finish the scheduler runs again; the flag flips where the
    API has one, the held request and the late arrivals run, the next arrival is not held."""
    before = held_snapshot(paused, held)
    flags = dict(before.flags) | ({} if paused is None else {paused: False})
    ended = "finish_reason 'length'" if arrival_tokens == 8 else None
    after = StateSnapshot(flags, (Seen("in-flight", 90),) if held else (),
                          (Seen("late-0", arrival_tokens, ended), Seen("late-1", 2)))
    return wj.side_effect_problems("finish_weight_update (version 'leaves-state-B')", before, after)
def _loaded(engine: int, file: str) -> str:
    """vllm_lifecycle/weight_transfer/backend.py's line for a chunk of five a worker loaded."""
    return f"vllm-lifecycle-weights: loaded 5 tensor(s) from {file} (dp{engine} pid {100 + engine})"


def _init(engine: int, trainer: str = "conformance-suite") -> str:
    """backend.py's line for an init that reached a worker's engine."""
    return f"vllm-lifecycle-weights: init from trainer {trainer!r} (dp{engine} pid {100 + engine})"


# A dp2 session as the suite records it: the init, then one chunk per engine.
INIT_SESSION = [
    WeightCall("/init_weight_transfer_engine", {"init_info": {"trainer": "conformance-suite"}}, 200, {}),
    WeightCall("/update_weights", {"update_info": [{"path": f"/x/B-dp{i}.safetensors", "names": None}
                                                   for i in (0, 1)]}, 200, {})]


def state_is(context: str, expected: StateView, seen: StateView) -> str:
    """fixtures/judging/assertions.py:state_is."""
    return f"{context}: expected {expected.describe()}; observed {seen.describe()}"


def reply_is(want: str, observed: str) -> str:
    """fixtures/judging/assertions.py:reply_is (want: status and body; observed: Reply.describe())."""
    return f"expected {want}; observed {observed}"


def held_answered_at_once(context: str, seen: Generation) -> str:
    """fixtures/judging/assertions.py:held, answered before /load counted it."""
    return (f"{context}: the request was answered while it should be held (before it was seen "
            f"counted by /load); observed {seen.summary()}")


def held_never_accepted(context: str, seen: Generation) -> str:
    """fixtures/judging/assertions.py:held, /load never counted it."""
    return f"{context}: the request was never accepted (/load stayed 0); observed {seen.summary()}"


def held_during_window(context: str, samples: Sequence[HoldSample], seen: Generation) -> str:
    """fixtures/judging/assertions.py:held, something showed during the hold window."""
    return (f"{context}: " + "; ".join(hold_problems(samples, 3.0))
            + f" (window sized for 32 tokens at 40 tokens/s); observed {seen.summary()}")


def held_on_both_engines(context: str, samples: Sequence[HoldSample], seen: Generation) -> str:
    """fixtures/judging/assertions.py:held_on_engines, one request on each of two engines, both
    showing the same during the hold window."""
    problems = [f"engine {rank}: {p}" for rank in (0, 1) for p in hold_problems(samples, 3.0)]
    return (f"{context}: " + "; ".join(problems) + " (window sized for 32 tokens at 40 tokens/s); "
            "observed " + " | ".join(f"engine {rank}: {seen.summary()}" for rank in (0, 1)))


def beyond(measurements: Sequence[object]) -> str:
    """fixtures/plugin/engines.py:measure: the measurements beyond their limits."""
    return "; ".join(m.describe() for m in measurements if not m.ok)  # type: ignore[attr-defined]


def deltas(outputs: list[list[int]], reference: list[int], last_reason: str = "length") -> str:
    """conformance/custody/test_drain_delivers_once.py over delivery.exactly_once_problems."""
    history = [{"token_ids": ids, "finished": i == len(outputs) - 1,
                "finish_reason": last_reason if i == len(outputs) - 1 else None, "phase": "drain"}
               for i, ids in enumerate(outputs)]
    return "; ".join(delivery.exactly_once_problems("delta", history, reference)) + "; observed 1 request"


def streamed_then_aborted() -> str:
    """fixtures/judging/with_work.py:streaming_problems: a request streaming across the call,
    ended by it with 'abort' after 40 of its 500 tokens."""
    return "POST /resume: " + "; ".join(judges.completion_problems(gen("abort", 40, chunks=5), 500))


def held_then_ended(name: str, tokens: int, step: str = "a second POST /pause?mode=keep") -> str:
    """fixtures/judging/with_work.py:still_held_problems: a held request ended by the call."""
    seen = gen("abort", tokens, chunks=min(tokens, 3))
    seen.done.set()
    return with_work.moved_problems(name, seen, tokens, tokens, step)[0]


def held_then_ran(step: str = "a second POST /pause?mode=keep") -> str:
    """The same, a held request that ran on instead (another failure of the behaviour)."""
    return with_work.moved_problems("kept request", gen(None, 40, chunks=9, ended=False), 12, 40, step)[0]


WORK_HELD_ENDED = [held_then_ended("kept request", 12), held_then_ended("arrived request", 0)]


ABORTED_AT_ONCE = gen("abort", 0)
STREAM_ENDED_BARE = gen(None, None)  # a stream aborted before its first token: no finish reason
RAN_IN_FULL = gen("length", 32, chunks=32)
RAN_SAMPLES = [HoldSample(0.0, False, 0, 1.0), HoldSample(0.4, False, 3, 1.0), HoldSample(0.8, True, 3, 0.0)]
ANSWERED_SAMPLE = [HoldSample(0.2, True, 0, 0.0)]
REF = list(range(16))

def on_engines(call: str, *reasons: str) -> str:
    """fixtures/judging/custody.py keep_fates_problems: one request per data-parallel engine, each
    ending with its reason ('abort' cut at 3 tokens), judged as a kept request (the test's
    prefix: the call)."""
    problems: list[str] = []
    for rank, reason in enumerate(reasons):
        seen = gen(reason, 3 if reason == "abort" else 8, chunks=3 if reason == "abort" else 8)
        problems += Flight(seen, 8, None, rank).says(judges.completion_problems(seen, 8))
    return f"{call}: " + "; ".join(problems)


def ended(finish: str, tokens: int) -> Outcome:
    """One request that reached its caller ended, as the generation part records it."""
    return Outcome(True, list(range(tokens)), tokens, finish, None, 1, f"{finish} at {tokens}", "paused")


def paused_on_engines(mode: str, *reasons: str) -> str:
    """custody.pause_fate_problems over one request per data-parallel engine, each ending with
    its reason ('abort' cut at 3 tokens; the test's prefix: the pause)."""
    return f"/pause?mode={mode}: " + "; ".join(
        f"engine {rank}: {p}" for rank, reason in enumerate(reasons)
        for p in custody.pause_fate_problems(mode, ended(reason, 3 if reason == "abort" else 8), 8, None))


def _sleep_ops_text(sleeps: int, wakes: int, releases: int, releases_in_flight: int) -> str:
    """A /metrics text of the sleep-mode operation series (a series never touched is absent)."""
    lines = ["# TYPE vllm:sleep_mode_operation_duration_seconds histogram",
             "# TYPE vllm:sleep_mode_operations_in_flight gauge"]
    for op, count, in_flight in (("sleep", sleeps, 0), ("wake", wakes, 0),
                                 ("release_kv_cache_memory", releases, releases_in_flight)):
        if count:
            lines.append(f'vllm:sleep_mode_operation_duration_seconds_count{{operation="{op}"}} {count}')
        if count or in_flight:
            lines.append(f'vllm:sleep_mode_operations_in_flight{{operation="{op}"}} {in_flight}')
    return "\n".join(lines) + "\n"


# (fault, behaviour) -> every message that fault's effect can make the behaviour's test fail with.
FAULT_MESSAGES: dict[tuple[str, str], list[str]] = {
    # conformance/misuse: the with-work instances (fixtures/judging/with_work.py)
    ("noop-resume-aborts", "misuse/resume-while-running"): [streamed_then_aborted()],
    ("noop-resume-aborts", "misuse/wake-while-awake"): [streamed_then_aborted()],
    ("unknown-tag-wake-aborts", "misuse/unknown-wake-tag"): WORK_HELD_ENDED,
    ("repeat-pause-aborts", "misuse/pause-while-paused"): WORK_HELD_ENDED,
    ("repeat-pause-aborts", "misuse/sleep-while-asleep"): WORK_HELD_ENDED,
    ("refused-release-aborts", "misuse/release-kv-out-of-order"): [streamed_then_aborted(), *WORK_HELD_ENDED],
    ("route-refusal-aborts", "misuse/invalid-sleep-level"): [streamed_then_aborted()],
    ("route-refusal-aborts", "misuse/invalid-mode"): [streamed_then_aborted()],
    ("route-refusal-aborts", "misuse/invalid-mode-while-paused"): WORK_HELD_ENDED,
    ("partial-wake-resumes", "flags/partial-wake"): [
        # conformance/flags/test_sleep_flags.py, over HTTP and through the Python API
        *state_problems(State({"is_sleeping": True, "is_paused": False}, SLEEP_GAUGE[1], True), True,
                        SLEEP_GAUGE[1], "after waking only weights"),
        *state_problems(State({"is_sleeping": True, "is_paused": False}, None, False), True,
                        SLEEP_GAUGE[1], "after waking only weights"),
        *answer_problems(Answer("wake_up", {"tags": ["weights"]}, Called("wake_up", True, seconds=0.01)),
                         awake=False)],
    ("partial-wake-resumes", "gating/partial-wake-holds-requests"): [
        held_during_window("only 'weights' awake", RAN_SAMPLES, RAN_IN_FULL),
        held_answered_at_once("only 'weights' awake", RAN_IN_FULL),
        held_on_both_engines("only 'weights' awake", RAN_SAMPLES, RAN_IN_FULL),
        # through the Python API, on one engine and on dp2: one look, what the frontend processed
        *held_problems(Hold({None: [HoldSample(0.4, False, 3, None, 12)]}, 3.0, "w",
                            {None: "held: 3 outputs"}), "only 'weights' awake"),
        *held_problems(Hold({0: [HoldSample(0.4, False, 0, None, 2)],
                             1: [HoldSample(0.4, True, 12, None, 32)]},
                            3.0, "w", {0: "held-0: no output", 1: "held-1: 12 outputs"}),
                       "only 'weights' awake")],
    ("keep-aborts", "custody/pause-in-flight"): [
        "/pause?mode=keep: " + "; ".join(custody.pause_fate_problems("keep", ended("abort", 3), 8, None))],
    ("keep-aborts", "custody/sleep-in-flight"): [
        "/sleep?level=1&mode=keep: " + "; ".join(judges.completion_problems(gen("abort", 3), 8))],
    ("dp-keep-aborts-one-rank", "custody/pause-in-flight"): [
        paused_on_engines("keep", "length", "abort"), paused_on_engines("keep", "length", "abort", "abort")],
    ("dp-keep-aborts-one-rank", "custody/sleep-in-flight"): [
        on_engines("/sleep?level=1&mode=keep", "length", "abort")],
    ("wait-skips-drain", "custody/sleep-in-flight"): [
        "/sleep?level=1&mode=wait: " + "; ".join(judges.completion_problems(gen("abort", 3), 8))],
    ("wait-skips-drain", "custody/drain-before-offload"): [
        "first: " + "; ".join(judges.completion_problems(gen("abort", 3), 8))],
    # /is_sleeping false while a memory tag sleeps, at each test's first check of the flags.
    **{("sleep-flag-stale", b): [state_is(context, asleep(level), StateView(False, True, SLEEP_GAUGE[level]))
                                 for level in (1, 2)]
       for b, context in (("flags/sleep-level", "after /sleep?level=1"),
                          ("flags/partial-wake", "after waking only weights"),
                          ("flags/scheduling-tag", "after tags=scheduling from level 1"),
                          ("misuse/sleep-while-asleep", "after the second sleep"))},
    ("gauge-not-updated", "flags/sleep-level"): [
        state_is(f"after /sleep?level={level}", asleep(level), PAUSED) for level in (0, 1, 2)],
    ("gauge-not-updated", "flags/partial-wake"): [
        state_is(f"after waking only {tag}", asleep(1), PAUSED) for tag in ("weights", "kv_cache")],
    # conformance/custody/test_drain_before_offload.py, the gauge read after the sleep answered
    ("gauge-not-updated", "custody/drain-before-offload"): [
        f"gauge after the sleep: expected {SLEEP_GAUGE[level]}; observed {AWAKE_GAUGE}" for level in (1, 2)],
    ("late-arrival-dropped", "custody/late-arrival"): [
        held_answered_at_once("profile 0.32, /pause?mode=keep", ABORTED_AT_ONCE),
        held_answered_at_once("profile 0.32, /pause?mode=abort", STREAM_ENDED_BARE),
        held_answered_at_once("profile 0.32, /pause?mode=wait", gen(None, None, chunks=1)),
        held_during_window("profile 0.32, /pause?mode=keep", ANSWERED_SAMPLE, ABORTED_AT_ONCE),
        held_never_accepted("profile 0.32, /pause?mode=keep", ABORTED_AT_ONCE)],
    ("late-arrival-dropped", "gating/partial-wake-holds-requests"): [
        held_answered_at_once("only 'weights' awake", ABORTED_AT_ONCE),
        held_during_window("only 'kv_cache' awake", ANSWERED_SAMPLE, STREAM_ENDED_BARE)],
    # conformance/golden/test_golden_output.py
    ("wake-perturbs-weights", "golden/after-wake"): [
        "after a level-1 sleep and wake: token ids differ from the golden run at position 3"],
    ("wake-perturbs-weights", "mechanism/logprob-drift"): [
        beyond(measured.logprob_drift([-1.0, -2.0], [-1.3, -2.0], LIMITS)),
        beyond(measured.logprob_drift([-1.0, -2.0], [float("nan"), -2.0], LIMITS))],
    ("rss-leak-per-cycle", "mechanism/host-rss-stable"): [
        beyond(measured.host_rss_stable([1000 + 64 * i for i in range(10)], LIMITS)),
        beyond(measured.host_rss_stable([1000 + 12 * i for i in range(10)], LIMITS))],
    # conformance/weights/test_sync_casts.py over weight_judges.serves_problems
    ("weights-chunk-dtype-reinterpreted", "weights/sync-casts-on-load"): wj.serves_problems(
        {"engine": [7] * 8}, "B-float16", CAST_GOLDENS, "after the sync of B-float16"),
    # conformance/weights/test_lora_across_sync.py: the adapter's request served as the base model
    ("weights-lora-slots-stale", "weights/lora-follows-sync"): [
        *wj.serves_problems({"the adapter": [2] * 8}, "B with the adapter", LORA_GOLDENS,
                            "after the session sync of B"),
        *wj.serves_problems({"the adapter": [1] * 8}, "A with the adapter", LORA_GOLDENS,
                            "after the reload-from-path sync of A")],
    # conformance/weights/test_many_syncs.py: one thread and a pipe's two ends per session
    ("weights-session-leaks", "weights/many-syncs-stable"): [
        beyond(measured.many_syncs_stable(
            [measured.SyncReading(1 << 30, 75 + i, 172 + 2 * i, 0.06) for i in range(30)], LIMITS))],
    ("rss-leak-per-cycle", "mechanism/device-memory-stable"): [
        beyond(measured.device_memory_stable([(3 << 30) + (128 << 20) * i for i in range(10)], LIMITS))],
    ("double-sleep-500", "misuse/sleep-while-asleep"): [
        reply_is("200 {'status': 'sleeping', 'level': 1}",
                 "POST /sleep?level=1 -> 500 {'error': 'Call to sleep method failed'} (0.02 s)"),
        # with work: the keep-mode repeat (with_work.answered)
        "POST /sleep?level=1&mode=keep: " + with_work.answered(200, {"status": "sleeping", "level": 1})(
            Reply("POST", "/sleep?level=1&mode=keep", 500, {"error": "Call to sleep method failed"},
                  0.02))[0]],
    # The caller read only the newest of the deltas buffered during the drain.
    ("buffered-delta-dropped", "custody/drain-delivers-once"): [
        deltas([REF[:2], REF[9:]], REF), deltas([REF[:4], REF[4:5], REF[12:]], REF)],
    ("dp-wake-reaches-one-rank", "topology/every-rank-follows"): [
        "after /wake_up: the engines gave no common answer: GET /is_sleeping -> 500 {'error': "
        "'Engines returned different is_sleeping results'} (0.01 s); GET /is_paused -> 200 (0.01 s)",
        "held request #1 did not finish within 15 s of the full wake"],
    ("dp-wake-reaches-one-rank", "topology/kv-wake-then-resume"): [
        "POST /wake_up got no answer within 15 s",
        *tj.served_problems({"0": 0.0, "1": 0.0}, {"0": 8.0, "1": 0.0}, 8, "after the full wake")],
    ("dp-coordinator-latch", "topology/drain-after-late-request"): tj.drain_round_problems(
        [tj.DrainRound(1, None, 30.0, "TimeoutError: Timeout reached after 30 seconds", True, None,
                       {}, 8, {})], 10.0, 30.0),
    # conformance/topology/test_collective_rpc_paused.py
    ("dp-stale-wave-wakes-paused", "topology/collective-rpc-while-paused"): [
        "round 1: POST /collective_rpc got no answer within 15 s",
        "round 2: the request sent while paused did not finish within 15 s"],
    ("dp-pause-completes-before-consensus", "topology/quiescent-after-pause"): [
        beyond(tj.quiescence({"EngineCore_DP0": 0.01}, {"EngineCore_DP0": 0.95},
                             LIMITS["topology/quiescent-after-pause:busy_cores_above_idle"],
                             "after /pause?mode=keep")),
        beyond([LIMITS["topology/quiescent-after-pause:idle_pause_s"].judge(40.0)])],
    ("frontend-stale-pause", "topology/admission-every-frontend"): tj.frontend_problems(
        {101: True, 102: False}, True, "/is_paused", "POST /pause?mode=keep through pid 101"),
    ("weights-sync-first-engine-only", "weights/sync-reaches-every-rank"): wj.serves_problems(
        {"engine 0": [1, 2], "engine 1": [7, 8]}, "B", {"A": [7, 8], "B": [1, 2]}, "after the sync"),
    # Every worker read entry 0: engine 1 loaded engine 0's file (the test's own-loads check).
    ("weights-dp-reads-entry-0", "weights/sync-reaches-every-rank"): wj.rank_load_problems(
        [_loaded(0, "B-dp0.safetensors"), _loaded(1, "B-dp0.safetensors")],
        {0: [wj.Load("B-dp0.safetensors", 5)], 1: [wj.Load("B-dp1.safetensors", 5)]}, "the sync of B"),
    # The init reached engine 0's worker only: engine 1 loaded its chunks with no init before.
    ("weights-init-first-engine-only", "weights/sync-reaches-every-rank"): wj.rank_init_problems(
        [_init(0), _loaded(0, "B-dp0.safetensors"), _loaded(1, "B-dp1.safetensors")], INIT_SESSION,
        "the sync of B"),
    ("weights-version-without-weights", "weights/sync-lands"): wj.serves_problems(
        {"the engine": [7, 8]}, "B", {"A": [7, 8], "B": [1, 2]}, "after the sync"),
    ("weights-version-without-weights", "weights/rl-cycle"): wj.serves_problems(
        {"the engine": [7, 8]}, "B", {"A": [7, 8], "B": [1, 2]}, "cycle 1"),
    ("weights-sync-drops-a-tensor", "weights/sync-lands"): wj.serves_problems(
        {"the engine": [1, 9]}, "B", {"A": [7, 8], "B": [1, 2]}, "after the sync"),
    ("weights-keep-pause-stale-kv", "weights/held-request-one-version"): wj.switch_problems(
        [1, 2, 9, 9], [1, 2, 3, 4], {2: [5, 6], 1: [5, 6, 7]}),
    ("weights-version-without-weights", "weights/late-arrival-new-version"): wj.serves_problems(
        {"the late arrival": [7, 8]}, "B", {"A": [7, 8], "B": [1, 2]},
        "/pause?mode=keep, sync of B, /resume"),
    ("weights-version-without-weights", "weights/sync-while-asleep"): wj.serves_problems(
        {"the engine": [7, 8]}, "B", {"A": [7, 8], "B": [1, 2]},
        "sleep level 2, a sync landed while asleep, full wake"),
    # conformance/weights/test_prefix_cache_across_sync.py joins its problems
    ("weights-keep-pause-stale-kv", "weights/prefix-cache-across-sync"): ["; ".join(
        wj.reused_prefix_problems([1, 9], [1, 2], [7, 8], 48, True,
                                  "pause-clears: the prompt after the sync"))],
    # The engine never left A: A's fresh run on every path, the cache cleared or kept.
    ("weights-version-without-weights", "weights/prefix-cache-across-sync"): [
        "; ".join(wj.reused_prefix_problems([7, 8], [1, 2], [7, 8], cached, cleared,
                                            f"{path}: the prompt after the sync"))
        for path, cached, cleared in (("pause-clears", 0, True), ("explicit-reset", 0, True),
                                      ("cache-kept", 48, False))],
    # A's run went on past the switch points and their window (the references' length).
    ("weights-version-without-weights", "weights/held-request-one-version"): wj.held_request_problems(
        [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6], 8, 2, 3, {s: [9, 9] for s in range(1, 5)}),
    # conformance/weights/test_aborted_request_version.py: judges.abort_problems, then the prefix judge
    ("weights-abort-pause-keeps-requests", "weights/aborted-request-old-version"): [
        "; ".join(["finish reasons ['length'], expected all 'abort'",
                   "1200 tokens: the request ran to its end, not cut by abort",
                   *wj.old_prefix_problems([1, 2, 9, 9], [1, 2, 3, 4],
                                           "the request the abort pause cut")])],
    # conformance/weights/test_version_spans.py through the Python API: the held request (AsyncLLM), then
    # the request after the sync (every engine); the engine started on "default".
    ("weights-version-label-frozen", "weights/version-spans"): [
        "; ".join(wj.span_problems([["default", 0, 600]], 600, ["default", "spans-B"], "held")),
        "; ".join(wj.span_problems([["default", 0, 16]], 16, ["spans-B"], "after the sync"))],
    # conformance/metrics/test_sleep_ops.py: the refused release neither observed nor released.
    ("sleep-op-recorder-skips-failures", "metrics/sleep-ops-counted"): [
        "; ".join(sleep_ops.count_problems(
            _sleep_ops_text(1, 1, 0, 0), _sleep_ops_text(1, 1, 0, 1),
            {**sleep_ops.NOTHING, "release_kv_cache_memory": 1.0},
            "after a /release_kv_cache_memory the engine refused"))],
    # conformance/weights/test_weight_version.py writes the acceptance itself
    ("weights-finish-without-session", "weights/version-follows-commits"): [
        "a finish without a session: accepted (POST /finish_weight_update -> 200 {'message': "
        "'Weight update finished'} (0.01 s)), expected a refusal"],
    ("weights-version-cached-per-frontend", "weights/routes-every-frontend"): wj.version_problems(
        {"API server pid 102": "default"}, "frontends-B", "after the session"),
    # conformance/weights/test_weight_checker.py writes the compare it got
    ("weights-checker-blind", "weights/checker"): [
        "after syncing checkpoint B the compare against A's checksums reports "
        f"{ {'match': True, 'mismatches': []} }"],
    ("weights-update-counted-twice", "weights/operation-metrics"): wj.operation_count_problems(
        {"update": 4.0}, {"init": 1.0, "start": 1.0, "update": 12.0, "finish": 1.0},
        {"init": 1, "start": 1, "update": 4, "finish": 1}),
    # conformance/weights/test_version_spans.py over HTTP: the held request's spans (the version before the
    # sync is whatever an earlier test committed)
    ("weights-held-span-keeps-label", "weights/version-spans"): wj.span_problems(
        [["checker-A", 0, 600]], 600, ["checker-A", "spans-B"],
        "a request held by a keep pause across the sync (212 tokens at the pause)"),
    # conformance/weights/test_sync_leaves_state.py over both transports: "<state>: " and the
    # problems joined; over HTTP paused and asleep, offline AsyncLLM paused and LLM asleep
    # (is_sleeping() alone: only the late arrivals show it).
    ("weights-finish-resumes", "weights/sync-leaves-state"): [
        "paused-keep: " + "; ".join(finish_resumed("/is_paused", held=True)),
        "asleep-weights-woken: " + "; ".join(finish_resumed("/is_paused", held=False)),
        "paused-keep: " + "; ".join(finish_resumed("is_paused()", held=True)),
        "asleep-weights-woken: " + "; ".join(finish_resumed(None, held=False)),
        "asleep-weights-woken: " + "; ".join(finish_resumed(None, held=False, arrival_tokens=8))],
}

# Per behaviour, failures its test can report that are NOT those faults' effects: another
# step gone wrong, a hung request, another fault's effect.
OTHER_MESSAGES: dict[str, list[str]] = {
    # The sync not landed under the adapter or the base model, or a mix: not a dropped adapter.
    "weights/lora-follows-sync": [
        *wj.serves_problems({"the adapter": [3] * 8}, "B with the adapter", LORA_GOLDENS,
                            "after the session sync of B"),
        *wj.serves_problems({"the adapter": [9] * 8}, "B with the adapter", LORA_GOLDENS,
                            "after the session sync of B"),
        *wj.serves_problems({"the base model": [1] * 8}, "B", LORA_GOLDENS,
                            "after the session sync of B")],
    # The chunks dropped (A still served): not a misread dtype.
    "weights/sync-casts-on-load": wj.serves_problems(
        {"engine": [1] * 8}, "B-float16", CAST_GOLDENS, "after the sync of B-float16"),
    # Memory or time that grew, or the last sync's checkpoint not served: not a leaked session.
    "weights/many-syncs-stable": [
        beyond(measured.many_syncs_stable(
            [measured.SyncReading((1 << 30) + (64 << 20) * i, 75, 172, 0.06 * (1 + i)) for i in range(30)],
            LIMITS)),
        "after 30 syncs, the last of A: engine serves checkpoint B's output, expected A's"],
    # A held request that ran on, or a refused repeat: not the work ended.
    "misuse/pause-while-paused": [
        held_then_ran(),
        reply_is("200 {'status': 'paused'}", "POST /pause -> 500 {'error': 'boom'} (0.01 s)")],
    # A resume refused, or a stream that finished with other ids.
    "misuse/resume-while-running": [
        reply_is("200 {'status': 'resumed'}", "POST /resume -> 500 {'error': 'boom'} (0.01 s)"),
        "POST /resume: token ids differ from the uninterrupted run from position 3 (500 vs 500 ids)"],
    # A rank's own loads wrong otherwise: none logged, a short chunk, or rank 0 on rank 1's entry.
    "weights/sync-reaches-every-rank": [
        *wj.rank_load_problems(
            [_loaded(0, "B-dp1.safetensors"), _loaded(2, "B-dp0.safetensors")],
            {0: [wj.Load("B-dp0.safetensors", 5)], 1: [wj.Load("B-dp1.safetensors", 5)]}, "s"),
        "s: engine 1 loaded 4 tensor(s) from B-dp1.safetensors in chunk 1, its entry names 5",
        # an init that reached engine 1 with another trainer, or missed engine 0 only
        *wj.rank_init_problems([_init(0), _init(1, "other"), _loaded(0, "B-dp0.safetensors"),
                                _loaded(1, "B-dp1.safetensors")], INIT_SESSION, "s"),
        *wj.rank_init_problems([_init(1), _loaded(0, "B-dp0.safetensors"),
                                _loaded(1, "B-dp1.safetensors")], INIT_SESSION, "s")],
    # Every engine cut (keep-aborts on each rank), or only the first: not one rank off the others.
    "custody/pause-in-flight": [
        paused_on_engines("keep", "abort", "abort"), paused_on_engines("keep", "abort", "length"),
        "/pause?mode=keep: engine 1: " + "; ".join(judges.freeze_problems(3, 5, 8)),
        paused_on_engines("abort", "abort", "length")],
    "custody/sleep-in-flight": [
        on_engines("/sleep?level=1&mode=keep", "abort", "abort"),
        "/sleep?level=1&mode=wait: engine 1: " + "; ".join(judges.completion_problems(gen("abort", 3), 8))],
    "mechanism/host-rss-stable": [
        "cycle 3, the request after the wake: " + "; ".join(judges.completion_problems(gen("abort", 2), 16)),
        reply_is("200 {'status': 'sleeping', 'level': 1}",
                 "POST /sleep?level=1 -> 500 {'error': 'host RSS unreadable'} (0.02 s)"),
        # the measurements within their limits never fail the test
        "mechanism/host-rss-stable growth_per_cycle: observed 0.001 fraction of the first cycle's "
        "RSS, limit <= 0.01 (within by 0.009)"],
    "mechanism/device-memory-stable": [
        reply_is("200 {'status': 'sleeping', 'level': 1}",
                 "POST /sleep?level=1 -> 500 {'error': 'sleep failed'} (0.02 s)"),
        "mechanism/device-memory-stable residual_growth_per_cycle: observed 1.04858e+06 bytes per "
        "cycle, limit <= 6.71089e+07 (within by 6.60603e+07)"],
    "mechanism/logprob-drift": [
        reply_is("200 {'status': 'awake'}", "POST /wake_up -> 500 {'error': 'logprobs'} (0.02 s)"),
        "mechanism/logprob-drift max_abs_logprob_diff: observed 0.001 nats, limit <= 0.01 "
        "(within by 0.009)"],
    "custody/drain-delivers-once": [
        deltas([REF[:8], REF[4:]], REF),  # a delta delivered twice is no loss
        deltas([REF[:8], REF[8:]], REF, last_reason="abort"),
        deltas([REF[:8], [99] * 8], REF),  # same length, other tokens: corrupted, not lost
        "sleep(mode='wait') raised RuntimeError: delta collector closed (0.10 s); expected it to "
        "return; observed 1 request"],
    "custody/late-arrival": [
        "held request after /resume: " + "; ".join(judges.completion_problems(gen("abort", 5), 48)),
        "held request did not finish after /resume",
        held_during_window("profile 0.32, /pause?mode=keep", RAN_SAMPLES, RAN_IN_FULL),
        held_answered_at_once("profile 0.32, /pause?mode=keep", gen("length", 48)),
        held_answered_at_once("profile 0.32, /pause?mode=keep", gen(None, None,
                                                                   error=RuntimeError("500"))),
        held_never_accepted("profile 0.32, /pause?mode=keep", gen(None, None, ended=False)),
        reply_is("200 {'status': 'paused'}", "POST /pause?mode=abort -> 500 {'error': 'aborted'} "
                 "(0.01 s)")],
    # conformance/gating/test_partial_wake_gating.py, over HTTP and through the Python API
    "gating/partial-wake-holds-requests": [
        "the request after waking 'kv_cache': engine 1: "
        + "; engine 1: ".join(judges.completion_problems(gen("abort", 4), 32)),
        "the request after waking 'kv_cache': "
        + "; ".join(judges.completion_problems(gen("length", 32), 32, reference=list(range(32)))),
        f"engine 1: no end to the request within 120 s of the full wake ('kv_cache' after "
        f"'weights'); observed {gen(None, None, ended=False).summary()}",
        "the full wake ('kv_cache' after 'weights'): POST /wake_up?tags=kv_cache got no answer "
        "within 120 s",
        "engine 1: no end to the request within 120 s of the full wake ('kv_cache' after "
        "'weights'); observed held-1: 0 outputs in phases []; no output",
        held_never_accepted("only 'weights' awake", gen(None, None, ended=False)),
        *answer_problems(Answer("wake_up", {"tags": ["weights"]},
                                Reply("POST", "/wake_up?tags=weights", 200, {"status": "awake"}, 0.01)),
                         awake=False)],
    "flags/sleep-level": [
        state_is("after /sleep?level=1", asleep(1), AWAKE),  # the sleep did not happen at all
        state_is("after /sleep?level=2", asleep(2), StateView(True, False, SLEEP_GAUGE[2])),
        state_is("after /sleep?level=1", asleep(1), StateView(True, True, SLEEP_GAUGE[2])),
        state_is("after /sleep?level=1", asleep(1), StateView(True, True, None))],
    "flags/partial-wake": [
        state_is("after waking kv_cache as well", AWAKE, asleep(1)),  # quotes the awake gauge
        state_is("after waking kv_cache as well", AWAKE, StateView(False, False, SLEEP_GAUGE[1])),
        state_is("after waking only weights", asleep(1), StateView(False, True, SLEEP_GAUGE[1])),
        reply_is("200 {'status': 'sleeping', 'tags': ['weights']}",
                 "POST /wake_up?tags=weights -> 200 {'status': 'awake'} (0.01 s)")],
    "weights/version-spans": [
        *wj.span_problems(None, 16, ["spans-B"], "a request run after the sync"),
        *wj.span_problems([["default", 0, 2], ["spans-B", 3, 600]], 600, ["default", "spans-B"], "held"),
        # a version lost before the test's sync: the label expected is not the sync's
        *wj.span_problems([["default", 0, 16]], 16, ["checkpoint-A"], "a request run before the sync"),
        *wj.switch_span_problems([["default", 0, 1], ["spans-B", 1, 4]], [1, 2, 3, 4], [1, 2, 3, 4],
                                 3, "held"),
        *wj.switch_span_problems([["default", 0, 4], ["spans-B", 4, 5]], [1, 2, 9, 9, 9],
                                 [1, 2, 3, 4, 5], 2, "held"),
        "the held request did not finish within 120 s of the resume",
        "pause_generation() raised RuntimeError: boom (0.01 s); expected it to return"],
    "weights/version-follows-commits": [
        *wj.version_problems({"/weight_info": "v-refused"}, "v-set", "after a finish without a session"),
        "update_weight_version was not accepted"],
    "weights/operation-metrics": [
        *wj.operation_count_problems({}, {"update": 3.0, "finish": 0.0}, {"update": 3, "finish": 1}),
        "vllm:rl_weight_update_operations_in_flight{operation=update} = 1 after every call returned"],
    "custody/drain-before-offload": [
        *judges.drain_gauge_problems([judges.GaugeReading(1.0, 1.1, SLEEP_GAUGE[1])], 2.0,
                                     AWAKE_GAUGE),
        f"gauge after the sleep: expected {SLEEP_GAUGE[1]}; observed {SLEEP_GAUGE[2]}",
        f"gauge after the sleep: expected {SLEEP_GAUGE[1]}; observed None",
        "first: " + "; ".join(judges.completion_problems(gen("abort", 3), 8)),
        f"request queued during the drain ran before the wake: {gen('length', 48).summary()}"],
    "weights/sync-leaves-state": [
        # a chunk that ends the held request; a checker call that answers a late arrival; the gauge
        "paused-keep: " + "; ".join(wj.side_effect_problems(
            "update_weights (3 tensors of checkpoint B)", held_snapshot("/is_paused", True),
            StateSnapshot(PAUSED_FLAGS, (Seen("in-flight", 40, "finish_reason 'abort'"),),
                          (Seen("late-0", 0), Seen("late-1", 0))))),
        "paused-keep: " + "; ".join(wj.side_effect_problems(
            "weight_checker checksum", held_snapshot("/is_paused", True),
            StateSnapshot(PAUSED_FLAGS, (Seen("in-flight", 40),),
                          (Seen("late-0", 8, "finish_reason 'length'"), Seen("late-1", 0))))),
        "asleep-weights-woken: " + "; ".join(wj.side_effect_problems(
            "finish_weight_update (version 'leaves-state-B')",
            StateSnapshot({**PAUSED_FLAGS, "the sleep-state gauge": SLEEP_GAUGE[1]}),
            StateSnapshot({**PAUSED_FLAGS, "the sleep-state gauge": AWAKE_GAUGE}))),
        "paused-keep: finish_weight_update (version 'leaves-state-B') was not accepted: "
        "POST /finish_weight_update -> 500 {'error': 'boom'} (0.01 s)",
        "paused-keep: after the release, in-flight: finish reasons ['abort'], expected all 'length'"],
    # conformance/weights/test_held_request_version.py: the request cut, or unlike A before the pause
    "weights/held-request-one-version": [
        *wj.held_request_problems([1, 7, 3, 4, 9, 9], [1, 2, 3, 4, 5, 6], 6, 3, 4, {}),
        f"the held request did not run to its length after the resume: {gen('abort', 3).summary()}"],
    # conformance/weights/test_prefix_cache_across_sync.py: a refused reset, a failed prompt, a
    # kept cache whose reuse went unreported
    "weights/prefix-cache-across-sync": [
        "explicit-reset: /reset_prefix_cache before /resume was refused: POST /reset_prefix_cache "
        "-> 500 {'error': 'boom'} (0.01 s)",
        "pause-clears: the prompt after the sync failed: "
        + gen(None, None, error=RuntimeError("500")).summary(),
        *wj.reused_prefix_problems([1, 9], [1, 2], [7, 8], 0, False,
                                   "cache-kept: the prompt after the sync")],
}


# The symptoms that once matched every message of their behaviour, and the one each fault's
# tightened wording now has to tell apart from the rest.
CROSS_CHECKED = {
    ("weights-chunk-dtype-reinterpreted", "weights/sync-casts-on-load"),
    ("weights-session-leaks", "weights/many-syncs-stable"),
    ("weights-lora-slots-stale", "weights/lora-follows-sync"),
    ("repeat-pause-aborts", "misuse/pause-while-paused"),
    ("noop-resume-aborts", "misuse/resume-while-running"),
    ("dp-keep-aborts-one-rank", "custody/pause-in-flight"),
    ("dp-keep-aborts-one-rank", "custody/sleep-in-flight"),
    ("rss-leak-per-cycle", "mechanism/host-rss-stable"),
    ("rss-leak-per-cycle", "mechanism/device-memory-stable"),
    ("wake-perturbs-weights", "mechanism/logprob-drift"),
    ("buffered-delta-dropped", "custody/drain-delivers-once"),
    ("late-arrival-dropped", "custody/late-arrival"),
    ("late-arrival-dropped", "gating/partial-wake-holds-requests"),
    ("partial-wake-resumes", "gating/partial-wake-holds-requests"),
    ("partial-wake-resumes", "flags/partial-wake"),
    ("gauge-not-updated", "flags/sleep-level"),
    ("gauge-not-updated", "flags/partial-wake"),
    ("gauge-not-updated", "custody/drain-before-offload"),
    ("weights-version-label-frozen", "weights/version-spans"),
    ("weights-held-span-keeps-label", "weights/version-spans"),
    ("weights-finish-without-session", "weights/version-follows-commits"),
    ("weights-update-counted-twice", "weights/operation-metrics"),
    ("weights-finish-resumes", "weights/sync-leaves-state"),
    ("weights-dp-reads-entry-0", "weights/sync-reaches-every-rank"),
    ("weights-init-first-engine-only", "weights/sync-reaches-every-rank"),
    ("weights-keep-pause-stale-kv", "weights/held-request-one-version"),
    ("weights-version-without-weights", "weights/held-request-one-version"),
    ("weights-keep-pause-stale-kv", "weights/prefix-cache-across-sync"),
    ("weights-version-without-weights", "weights/prefix-cache-across-sync"),
}

# With work, the flags are read through each API server after the repeated sleep
# (with_work.flag_problems): is_sleeping alone reads false.
FAULT_MESSAGES[("sleep-flag-stale", "misuse/sleep-while-asleep")] += with_work.flag_problems(
    [with_work.Sender("", lambda call: Reply("GET", call.path, 200,
                                             {call.path[1:]: call.path == "/is_paused"}, 0.0))],
    True, True, "POST /sleep?level=1&mode=keep")

PAIRS = [(f.name, b) for f in FAULTS.values() for b in f.breaks if f.symptom(b) is not None]


def _found(pattern: str, message: str) -> bool:
    return re.search(pattern, message, re.DOTALL) is not None  # as detection.cases.judge does


def test_every_fault_behaviour_with_a_symptom_has_its_messages_here():
    assert set(PAIRS) == set(FAULT_MESSAGES), set(PAIRS) ^ set(FAULT_MESSAGES)
    assert set(PAIRS) >= CROSS_CHECKED and set(OTHER_MESSAGES) == {b for _, b in CROSS_CHECKED}


@pytest.mark.parametrize(("fault", "behaviour"), PAIRS, ids=[f"{f}:{b}" for f, b in PAIRS])
def test_the_symptom_matches_every_message_of_the_faults_effect(fault, behaviour):
    symptom = FAULTS[fault].symptom(behaviour)
    assert symptom is not None
    messages = FAULT_MESSAGES[(fault, behaviour)]
    assert messages and all(messages)
    for message in messages:
        assert _found(symptom, message), message


@pytest.mark.parametrize(("fault", "behaviour"), sorted(CROSS_CHECKED),
                         ids=[f"{f}:{b}" for f, b in sorted(CROSS_CHECKED)])
def test_the_symptom_matches_no_other_failure_of_the_behaviour(fault, behaviour):
    """Other failures: the ones listed, and every other fault's effect on the same behaviour
    unless both faults name the same symptom."""
    symptom = FAULTS[fault].symptom(behaviour)
    assert symptom is not None
    others = list(OTHER_MESSAGES[behaviour])
    others += [m for (f, b), ms in FAULT_MESSAGES.items()
               if b == behaviour and f != fault and FAULTS[f].symptom(b) != symptom for m in ms]
    assert others
    for message in others:
        assert not _found(symptom, message), message
