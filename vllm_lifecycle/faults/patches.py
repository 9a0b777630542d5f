"""The replacements the faults install: factory(original) -> the function put in its place.

Each factory imports what it needs from vLLM lazily: this module is imported only once a fault
is armed, inside a vLLM process. Every replacement keeps the original's signature.
"""

from __future__ import annotations

import functools
import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

Fn = Callable[..., Any]

PAUSED_MESSAGE = "Generation is paused. Please retry after it resumes."
# What the rss-leak fault keeps alive; module-level so nothing ever frees it.
_LEAKED: list[bytearray] = []
LEAK_BYTES = 128 * 1024 * 1024  # twice device-memory-stable's bound per cycle
PERTURB_SCALE = 0.05  # noise per wake, relative to each tensor's standard deviation


# -- faults ------------------------------------------------------------------------------------

def wake_up_resumes_on_weights(original: Fn) -> Fn:
    @functools.wraps(original)
    def wake_up(self: Any, tags: list[str] | None = None) -> bool:
        fully_awake = original(self, tags)
        if not fully_awake and tags and "weights" in tags:
            self.resume_scheduler()  # the bug: kv_cache is still asleep
        return fully_awake
    return wake_up


def collector_put_replaces_deltas(original: Fn) -> Fn:
    @functools.wraps(original)
    def put(self: Any, output: Any) -> None:
        if not isinstance(output, Exception):
            self.output = None  # the bug: a pending (unread) delta is dropped, not merged
        original(self, output)
    return put


def pause_keep_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def pause_scheduler(self: Any, mode: str = "abort", clear_cache: bool = True) -> Any:
        return original(self, mode="abort" if mode == "keep" else mode, clear_cache=clear_cache)
    return pause_scheduler


def sleep_wait_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def sleep(self: Any, level: int = 1, mode: str = "abort") -> Any:
        return original(self, level=level, mode="abort" if mode == "wait" else mode)
    return sleep


def is_sleeping_ignores_executor(original: Fn) -> Fn:
    @functools.wraps(original)
    def is_sleeping(self: Any) -> bool:
        if self.model_executor.is_sleeping:
            return False
        return bool(original(self))
    return is_sleeping


def record_sleep_state_skips_sleep(original: Fn) -> Fn:
    @functools.wraps(original)
    def record_sleep_state(self: Any, sleep: int = 0, level: int = 0) -> None:
        if sleep:
            return None  # the bug: sleeps are never recorded; the awake reading stays
        return original(self, sleep, level)
    return record_sleep_state


def add_request_drops_while_paused(original: Fn) -> Fn:
    from vllm.v1.request import RequestStatus

    @functools.wraps(original)
    def add_request(self: Any, request: Any, request_wave: int = 0) -> None:
        original(self, request, request_wave)
        if not self.is_scheduler_paused():
            return
        aborted = self.scheduler.finish_requests([request.request_id], RequestStatus.FINISHED_ABORTED)
        send = getattr(self, "_send_abort_outputs", None)
        if send is not None and aborted:
            send(aborted)
    return add_request


def wake_up_perturbs_weights(original: Fn) -> Fn:
    import torch

    @functools.wraps(original)
    def wake_up(self: Any, tags: list[str] | None = None) -> None:
        original(self, tags)
        if tags is not None and "weights" not in tags:
            return
        generator = torch.Generator().manual_seed(1234)
        with torch.no_grad():
            for param in self.model_runner.get_model().parameters():
                if param.numel() > 1 and param.is_floating_point():
                    noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
                    param.add_(noise * (param.std() * PERTURB_SCALE))
    return wake_up


def sleep_leaks_host_memory(original: Fn) -> Fn:
    @functools.wraps(original)
    def sleep(self: Any, level: int = 1) -> None:
        original(self, level)
        _LEAKED.append(bytearray(b"\x01") * LEAK_BYTES)  # touched pages: resident, not lazy
    return sleep


def sleep_raises_when_asleep(original: Fn) -> Fn:
    @functools.wraps(original)
    def sleep(self: Any, level: int = 1, mode: str = "abort") -> Any:
        if self.model_executor.is_sleeping:
            raise RuntimeError("sleep called while the executor is already asleep")
        return original(self, level=level, mode=mode)
    return sleep


# -- spec preview: the layered contract (RFC #51476 §4, PR #53082) ----------------------------

class EngineNotPausedError(ValueError):
    """Sleep without a completed pause. A ValueError, so the API server answers 400 with it."""


def _not_paused() -> EngineNotPausedError:
    return EngineNotPausedError(
        "EngineNotPausedError: sleep releases memory only after a completed pause; "
        "call /pause first"
    )


def preview_async_sleep_requires_pause(original: Fn) -> Fn:
    @functools.wraps(original)
    async def sleep(self: Any, level: int = 1, mode: str = "abort") -> None:
        if not await self.engine_core.is_scheduler_paused_async():
            raise _not_paused()
        # No request-fate decision inside sleep: the mode is not passed on.
        await original(self, level, "keep")
    return sleep


def preview_engine_sleep_is_memory_only(original: Fn) -> Fn:
    from vllm.v1.core.sched.interface import PauseState

    @functools.wraps(original)
    def sleep(self: Any, level: int = 1, mode: str = "abort") -> None:
        paused = self.is_scheduler_paused()
        kept = self.scheduler.pause_state == PauseState.PAUSED_ALL
        if not paused or (not kept and self.scheduler.has_requests()):
            raise _not_paused()
        if level < 1:
            return None
        self._reset_caches()
        self.model_executor.sleep(level)
        return None
    return sleep


def preview_pause_closes_admission(original: Fn) -> Fn:
    @functools.wraps(original)
    async def pause_generation(self: Any, *, mode: str = "abort", clear_cache: bool = True) -> None:
        # Closed before the pause call, so the drain window of `wait` rejects too.
        self._lifecycle_admission_closed = mode != "keep"
        await original(self, mode=mode, clear_cache=clear_cache)
    return pause_generation


def preview_resume_opens_admission(original: Fn) -> Fn:
    @functools.wraps(original)
    async def resume_generation(self: Any) -> None:
        await original(self)
        self._lifecycle_admission_closed = False
    return resume_generation


def preview_full_wake_opens_admission(original: Fn) -> Fn:
    @functools.wraps(original)
    async def wake_up(self: Any, tags: list[str] | None = None) -> bool:
        fully_awake = await original(self, tags)
        if fully_awake:
            self._lifecycle_admission_closed = False
        return bool(fully_awake)
    return wake_up


def preview_generate_rejects_while_closed(original: Fn) -> Fn:
    from vllm.exceptions import RetryableRequestError

    @functools.wraps(original)
    async def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(self, "_lifecycle_admission_closed", False):
            raise RetryableRequestError(PAUSED_MESSAGE)
        async for output in original(self, *args, **kwargs):
            yield output
    return generate


# -- topology faults ------------------------------------------------------------------------

def wake_up_reaches_first_engine(original: Fn) -> Fn:
    @functools.wraps(original)
    async def wake_up_async(self: Any, tags: list[str] | None = None) -> bool:
        # The bug: the DP fan-out is lost; only the first engine wakes (one engine: no change).
        return all([await self._call_utility_async("wake_up", tags, engine=self.core_engines[0])])
    return wake_up_async


# Where a front-end keeps the pause state it last saw (per AsyncLLM, i.e. per API server).
FRONTEND_PAUSED_ATTR = "_lifecycle_frontend_paused"


def is_paused_from_frontend_cache(original: Fn) -> Fn:
    @functools.wraps(original)
    async def is_paused(self: Any) -> bool:
        # The bug: answered from this front-end's own record, read from the engine only once
        # and refreshed only by the lifecycle calls this front-end served.
        if FRONTEND_PAUSED_ATTR not in self.__dict__:
            self.__dict__[FRONTEND_PAUSED_ATTR] = await original(self)
        return bool(self.__dict__[FRONTEND_PAUSED_ATTR])
    return is_paused


def refreshes_frontend_pause_cache(original: Fn) -> Fn:
    @functools.wraps(original)
    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        self.__dict__[FRONTEND_PAUSED_ATTR] = await self.engine_core.is_scheduler_paused_async()
        return result
    return call


# -- the coordinator latch (RFC #51476 §1, the code before vLLM #51481) -----------------------
# The coordinator is a spawned process that never loads vLLM's plugins: the fault reaches it
# through the function the spawn runs, pickled by reference (plugin.py:run_coordinator_armed),
# which arms the fault there, then runs the original.
_LATCH_ANCHOR = re.compile(
    r"^(?P<indent>[ ]+)self\._send_start_wave\(\n\s+publish_back, current_wave, engine_to_exclude\n"
    r"\s+\)\n", re.MULTILINE)
_ORIGINAL_RUN_COORDINATOR: list[Fn] = []


def coordinator_predicts_running(original: Fn) -> Fn:
    """The coordinator's input loop, with the pre-#51481 prediction put back: forwarding a new
    request's START_DP_WAVE marks the engines running (and publishes it), though a paused
    engine drops that message and so never sends the wave_complete that would clear it."""
    source = textwrap.dedent(inspect.getsource(original))
    edited, count = _LATCH_ANCHOR.subn(
        lambda m: m.group(0) + f"{m['indent']}engines_running = True\n"
                               f"{m['indent']}wave_state_changed = True\n", source)
    if count != 1:  # the digest pin makes this unreachable unless the pin is edited by hand
        raise RuntimeError(f"the coordinator's START_DP_WAVE forwarding was found {count} times")
    namespace: dict[str, Any] = {}
    exec(compile(edited, inspect.getsourcefile(original) or "<coordinator>", "exec"),
         original.__globals__, namespace)
    return namespace[original.__name__]


# What the coordinator runs in place of the original. Arming lives above this module
# (vllm_lifecycle/faults/plugin.py imports it), so the plugin hands its entry in before it arms: this module
# never imports the plugin back.
COORDINATOR_ENTRY: list[Fn] = []


def coordinator_arms_itself(original: Any) -> Any:
    if not COORDINATOR_ENTRY:
        raise RuntimeError("coordinator_arms_itself needs the entry faults.plugin.arm hands in")
    _ORIGINAL_RUN_COORDINATOR[:] = [original.__func__]
    return staticmethod(COORDINATOR_ENTRY[0])


def original_coordinator() -> Fn | None:
    """The coordinator function the fault replaced in this process (None: not armed here)."""
    return _ORIGINAL_RUN_COORDINATOR[0] if _ORIGINAL_RUN_COORDINATOR else None


def start_wave_wakes_paused_engine(original: Fn) -> Fn:
    @functools.wraps(original)
    def handle(self: Any, request_type: Any, request: Any) -> None:
        from vllm.v1.engine import EngineCoreRequestType

        # The bug (vLLM #39366): a paused engine acts on the START_DP_WAVE that a request
        # arriving during the pause sets off, when it must drop it. The engine the request went
        # to is left out, as the coordinator asks (it names that engine by its identity bytes).
        if request_type != EngineCoreRequestType.START_DP_WAVE or not self.ignore_start_dp_wave:
            return original(self, request_type, request)
        exclude = request[1]
        if isinstance(exclude, bytes) and int.from_bytes(exclude, "little") == self.engine_index:
            return None
        self.ignore_start_dp_wave = False
        try:
            return original(self, request_type, request)
        finally:
            self.ignore_start_dp_wave = True
    return handle


# Consensus all-reduces a pause sits out under the fault below, stepping all the while. In vLLM
# before #52957 a pause waited out the 32-step sync cadence, seconds with a real MoE step; a
# dummy forward of the embedded model takes milliseconds on CPU, so more steps make the seconds.
PAUSE_CONSENSUS_ROUNDS = 64


def pause_completes_before_consensus(original: Fn) -> Fn:
    @functools.wraps(original)
    def complete(self: Any) -> bool:
        # The bug (RFC #51476 §3): the pause is reported complete as soon as it is asked for,
        # while every rank has just been kick-started to step to the consensus.
        original(self)  # pending_pause, and every rank stepping
        return True
    return complete


def consensus_on_a_slow_cadence(original: Fn) -> Fn:
    @functools.wraps(original)
    def sync(self: Any, local_unfinished: bool) -> bool:
        # The all-reduces stay exactly vLLM's (each rank meets the others at the same steps);
        # only the agreement they reach is set aside, the same way on every rank, until the
        # pause has sat out PAUSE_CONSENSUS_ROUNDS of them.
        pending = self.pending_pause
        running = original(self, local_unfinished)
        if pending and not self.pending_pause:  # the ranks agreed at this all-reduce
            agreed = getattr(self, "_fault_agreements", 0) + 1
            if agreed < PAUSE_CONSENSUS_ROUNDS:
                self._fault_agreements = agreed
                self.pending_pause, self.ignore_start_dp_wave = True, False
                return True
            self._fault_agreements = 0
        return running
    return sync


# -- weight-sync faults -------------------------------------------------------------------------
# All three wrap the backend's update_weights (the base class's, which every backend that does
# not override it runs), so they break the sync whatever backend the server was started with.
DROPPED_TENSOR = "layers.1.mlp.down_proj.weight"


def _update_loading(original: Fn, change: Callable[[Any, str, Any], Any]) -> Fn:
    """update_weights, with the engine's model loading what `change(engine dtype, name, tensor)`
    makes of each tensor (None: the tensor is dropped)."""
    @functools.wraps(original)
    def update_weights(self: Any, update_info: dict[str, Any]) -> None:
        model, dtype = self.model, self.model_config.dtype
        load = model.load_weights

        def changed(weights: Any) -> Any:
            return load([(n, c) for n, t in weights if (c := change(dtype, n, t)) is not None])

        model.load_weights = changed
        try:
            return original(self, update_info)
        finally:
            model.__dict__.pop("load_weights", None)
    return update_weights


def _update_loading_only(original: Fn, keep: Callable[[str], bool]) -> Fn:
    """update_weights, with the engine's model loading only the tensors `keep` admits."""
    return _update_loading(original, lambda dtype, name, tensor: tensor if keep(name) else None)


def update_reinterprets_dtype(original: Fn) -> Fn:
    # The bug: a tensor of another dtype of the same width as the engine's (float16 into a
    # bfloat16 engine) is taken as the engine's dtype, its bits read unconverted, as a receive
    # buffer allocated in the engine's dtype would hold them.
    return _update_loading(original, lambda dtype, name, tensor: (
        tensor.view(dtype) if tensor.dtype != dtype and tensor.element_size() == dtype.itemsize else tensor))


def update_reaches_first_engine(original: Fn) -> Fn:
    @functools.wraps(original)
    def update_weights(self: Any, update_info: dict[str, Any]) -> None:
        # The bug: a chunk for any engine but the first is acknowledged and never loaded.
        if getattr(self.parallel_config, "data_parallel_index", 0) > 0:
            return None
        return original(self, update_info)
    return update_weights


_LEFT_BEHIND: list[Any] = []  # what each session leaked, kept alive as a leak keeps it


def start_leaks_a_receiver(original: Fn) -> Fn:
    import os
    import threading

    @functools.wraps(original)
    def start_weight_update(self: Any) -> None:
        original(self)
        # The bug: each session starts a receiver thread on a pipe that nothing ever closes.
        reader, writer = os.pipe()
        receiver = threading.Thread(target=os.read, args=(reader, 1), daemon=True,
                                    name="weight-session-receiver")
        receiver.start()
        _LEFT_BEHIND.append((reader, writer, receiver))
    return start_weight_update


def lora_reset_keeps_registry(original: Fn) -> Fn:
    @functools.wraps(original)
    def reset_lora_state(self: Any) -> None:
        if not self.lora_config:
            return
        # The bug: the adapters' slots are cleared, but the manager keeps each adapter registered
        # and active, so its next request finds it loaded and never writes its weights back.
        manager = self.lora_manager._adapter_manager
        for module in manager.modules.values():
            for index in range(manager.lora_slots):
                module.reset_lora(index)
    return reset_lora_state


def init_reaches_first_engine(original: Fn) -> Fn:
    @functools.wraps(original)
    def init_weight_transfer_engine(self: Any, init_info: dict[str, Any]) -> None:
        # The bug: the init is acknowledged on every engine but the first, and never handed to
        # its weight-transfer engine.
        if getattr(self.parallel_config, "data_parallel_index", 0) > 0:
            return None
        return original(self, init_info)
    return init_weight_transfer_engine


def update_drops_every_chunk(original: Fn) -> Fn:
    # The bug: every chunk is acknowledged and dropped; finish still commits the version.
    return _update_loading_only(original, lambda name: False)


def update_drops_a_tensor(original: Fn) -> Fn:
    # The bug: one tensor of the chunk is lost on the way; its layer keeps a stale part.
    return _update_loading_only(original, lambda name: not name.endswith(DROPPED_TENSOR))


def update_reads_first_entry(original: Fn) -> Fn:
    @functools.wraps(original)
    def update_weights(self: Any, update_info: dict[str, Any] | list[dict[str, Any]]) -> None:
        # The bug: every worker takes the first entry of a per-worker list, not its own
        # (data_parallel_index * world_size + rank).
        return original(self, update_info[0] if isinstance(update_info, list) else update_info)
    return update_weights


def pause_abort_keeps(original: Fn) -> Fn:
    @functools.wraps(original)
    def pause_scheduler(self: Any, mode: str = "abort", clear_cache: bool = True) -> Any:
        # The bug: abort behaves as keep, so the requests it should end are frozen and resumed.
        return original(self, "keep" if mode == "abort" else mode, clear_cache)
    return pause_scheduler


def pause_keep_aborts_off_first_rank(original: Fn) -> Fn:
    @functools.wraps(original)
    def pause_scheduler(self: Any, mode: str = "abort", clear_cache: bool = True) -> Any:
        # The bug: a data-parallel engine other than the first applies keep as abort (its
        # requests in flight end); the first freezes its own as asked. One engine is rank 0.
        if mode == "keep" and getattr(self, "engine_index", 0) > 0:
            mode = "abort"
        return original(self, mode, clear_cache)
    return pause_scheduler


def pause_keep_keeps_cache(original: Fn) -> Fn:
    @functools.wraps(original)
    def pause_scheduler(self: Any, mode: str = "abort", clear_cache: bool = True) -> Any:
        # The bug: a keep pause never clears the cache, so a held request resumes on the KV
        # cache its earlier tokens left, whatever weights were loaded meanwhile.
        return original(self, mode, False if mode == "keep" else clear_cache)
    return pause_scheduler


def attach_first_version(original: Fn) -> Fn:
    @functools.wraps(original)
    def _attach_weight_version(self: Any, outputs: dict[int, Any]) -> None:
        # The bug: outputs keep the label the engine started with, whatever was committed since.
        for eco in outputs.values():
            eco.weight_version = "default"
    return _attach_weight_version


def record_skips_failures(original: Fn) -> Fn:
    import contextlib
    import time

    @contextlib.contextmanager
    @functools.wraps(original)
    def record(self: Any, operation: str) -> Any:
        active = self.in_flight.labels(operation)
        started = time.perf_counter()
        active.inc()
        yield  # the bug: no try/finally, so a call that raises is never observed nor released
        active.dec()
        self.duration.labels(operation).observe(time.perf_counter() - started)
    return record


# -- weight bookkeeping faults: what the API server reports of the weights ----------------------
NO_SESSION = "without a matching start_weight_update"


def finish_commits_without_session(original: Fn) -> Fn:
    @functools.wraps(original)
    async def finish_weight_update(self: Any, weight_version: str | None = None) -> None:
        try:
            await self.collective_rpc("finish_weight_update")
        except Exception as exc:
            # The bug: a finish with no session open is accepted, and commits its version.
            if NO_SESSION not in str(exc):
                raise
        if weight_version is not None:
            await self.update_weight_version(weight_version)
    return finish_weight_update


def weight_version_from_frontend_record(original: Fn) -> Fn:
    @functools.wraps(original)
    async def get_weight_version(self: Any) -> str:
        # The bug: each API server answers from its own record of the versions it committed,
        # never asking the engine: a commit through another API server goes unseen.
        return str(getattr(self, "_lifecycle_weight_version", "default"))
    return get_weight_version


def records_committed_version(original: Fn) -> Fn:
    @functools.wraps(original)
    async def update_weight_version(self: Any, new_version: str) -> None:
        await original(self, new_version)
        self._lifecycle_weight_version = new_version
    return update_weight_version


def checksums_from_first_answer(original: Fn) -> Fn:
    @functools.wraps(original)
    async def compute_weight_checksums(self: Any) -> list[dict[str, str]]:
        # The bug: the checker answers with the digests it computed first, blind to any sync.
        if not hasattr(self, "_lifecycle_checksums"):
            self._lifecycle_checksums = await original(self)
        return list(self._lifecycle_checksums)
    return compute_weight_checksums


def record_counts_updates_twice(original: Fn) -> Fn:
    from contextlib import contextmanager

    @functools.wraps(original)
    @contextmanager
    def record(self: Any, operation: str) -> Any:
        with original(self, operation):
            yield
        if operation == "update":
            # The bug: an accepted update is observed twice in the duration histogram.
            self.duration.labels(operation).observe(0.0)
    return record


def track_keeps_first_version(original: Fn) -> Fn:
    @functools.wraps(original)
    def track_weight_version(self: Any, weight_version: str) -> None:
        # The bug: the front-end keeps a request's first label, so tokens sampled after a sync
        # while it was held are reported under the old version.
        if not self.weight_version_starts:
            original(self, weight_version)
    return track_weight_version


def finish_resumes_scheduler(original: Fn) -> Fn:
    @functools.wraps(original)
    def collective_rpc(self: Any, method: Any, timeout: float | None = None, args: tuple = (),
                       kwargs: dict[str, Any] | None = None) -> Any:
        result = original(self, method, timeout, args, kwargs)
        if method == "finish_weight_update":
            self.resume_scheduler()  # the bug: the sync ends a pause that is the caller's
        return result
    return collective_rpc


# -- calls that must leave requests alone: a no-op, a repeat or a refusal that aborts them ------

def _abort_everything(core: Any) -> None:
    """End every request the engine core holds with 'abort', its client told (as an abort
    pause does)."""
    from vllm.v1.request import RequestStatus

    aborted = core.scheduler.finish_requests(None, RequestStatus.FINISHED_ABORTED)
    send = getattr(core, "_send_abort_outputs", None)
    if send is not None and aborted:
        send(aborted)


def noop_resume_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def resume_scheduler(self: Any) -> None:
        if not self.is_scheduler_paused():
            _abort_everything(self)  # the bug: a resume with nothing to resume ends the work
        original(self)
    return resume_scheduler


def unknown_tag_wake_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def wake_up(self: Any, tags: list[str] | None = None) -> bool:
        asleep = set(getattr(self.model_executor, "sleeping_tags", ()))
        named = [t for t in (tags or ()) if t != "scheduling"]
        if named and not set(named) <= asleep:
            _abort_everything(self)  # the bug: a wake that wakes nothing ends what is held
        return bool(original(self, tags))
    return wake_up


def repeat_pause_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def pause_scheduler(self: Any, mode: str = "abort", clear_cache: bool = True) -> Any:
        if mode != "abort" and self.is_scheduler_paused():
            _abort_everything(self)  # the bug: a repeated keep or wait pause ends what is held
        return original(self, mode=mode, clear_cache=clear_cache)
    return pause_scheduler


def refused_release_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    def release_kv_cache_memory(self: Any) -> None:
        ready = (self.is_scheduler_paused() and not self.scheduler.has_requests()
                 and not self.batch_queue and not self.model_executor.is_sleeping)
        if not ready:
            _abort_everything(self)  # the bug: the refusal ends the work before it refuses
        original(self)
    return release_kv_cache_memory


LIFECYCLE_ROUTES = ("/sleep", "/wake_up", "/pause", "/resume", "/release_kv_cache_memory")


def route_refusal_aborts(original: Fn) -> Fn:
    @functools.wraps(original)
    async def validation_exception_handler(req: Any, exc: Any) -> Any:
        if req.url.path in LIFECYCLE_ROUTES:
            # The bug: a lifecycle call refused for its parameters still ends this API
            # server's requests.
            client = req.app.state.engine_client
            ids = list(client.output_processor.request_states)  # internal ids
            if ids:
                await client.abort(ids, internal=True)
        return await original(req, exc)
    return validation_exception_handler
