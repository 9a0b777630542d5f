"""The replacements the faults install: factory(original) -> the function put in its place.

Each factory imports what it needs from vLLM lazily: this module is imported only once a fault
is armed, inside a vLLM process. Every replacement keeps the original's signature.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

Fn = Callable[..., Any]

PAUSED_MESSAGE = "Generation is paused. Please retry after it resumes."
# What the rss-leak fault keeps alive; module-level so nothing ever frees it.
_LEAKED: list[bytearray] = []
LEAK_BYTES = 64 * 1024 * 1024
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
