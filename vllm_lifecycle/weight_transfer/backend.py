"""A weight-transfer backend that moves real tensors on any platform: the trainer names a
safetensors file (and which of its tensors a chunk carries), the worker loads them through the
model's own weight loaders inside vLLM's layerwise reload, as the built-in ipc and nccl backends
do between their start and finish. Imported only inside vLLM worker processes.
"""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from vllm.distributed.weight_transfer.base import (  # type: ignore[import-not-found]
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)

from vllm_lifecycle.weight_transfer.extension import read_tensors
from vllm_lifecycle.weight_transfer.modes import FILE, IPC, init_mode

LOG_PREFIX = "vllm-lifecycle-weights:"


@dataclass
class FileInitInfo(WeightTransferInitInfo):
    """Who the trainer is (recorded in the log); the file backend needs no rendezvous."""

    trainer: str = "conformance-suite"


@dataclass
class FileUpdateInfo(WeightTransferUpdateInfo):
    """One chunk: a safetensors file and the names of the tensors it carries (None: all)."""

    path: str = ""
    names: list[str] | None = field(default=None)


def _no_mtp_check() -> Any:
    try:
        from vllm.model_executor.model_loader.mtp_validation import disable_mtp_completeness_check
    except ImportError:  # releases before the check existed
        return contextlib.nullcontext()
    return disable_mtp_completeness_check()


def _engine_rank(world_size: int) -> str:
    """This worker's rank within its engine, the `rank` vLLM indexes a per-worker update_info
    list with (data_parallel_index * world_size + rank): the world group spans every engine's
    workers, each engine's in a block of its own. "?" once the group is gone (a late shutdown)."""
    from vllm.distributed.parallel_state import get_world_group

    try:
        return str(int(get_world_group().rank_in_group) % world_size)
    except AssertionError:  # torn down
        return "?"


def _vllm_engine(mode: str) -> type:
    """vLLM's own worker-side engine for an ipc or nccl session (CUDA only)."""
    if mode == IPC:
        from vllm.distributed.weight_transfer.ipc_engine import IPCWeightTransferEngine

        return IPCWeightTransferEngine  # type: ignore[no-any-return]
    from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

    return NCCLWeightTransferEngine  # type: ignore[no-any-return]


class FileWeightTransferEngine(WeightTransferEngine[FileInitInfo, FileUpdateInfo]):
    """The suite's file chunks; an init from vLLM's own ipc or nccl trainer instead hands the
    session to vLLM's engine for it (vllm_lifecycle/weight_transfer/modes.py), so a GPU server started with
    this backend also serves vLLM's trainer side unchanged."""

    init_info_cls = FileInitInfo
    update_info_cls = FileUpdateInfo
    _delegate: Any = None  # vLLM's engine while an ipc or nccl session is set up

    def parse_init_info(self, init_dict: dict[str, Any]) -> Any:
        mode = init_mode(init_dict)
        if mode == FILE:
            if self._delegate is not None:
                self._delegate.shutdown()
            self._delegate = None
            return super().parse_init_info(init_dict)
        self._delegate = _vllm_engine(mode)(self.config, self.vllm_config, self.device, self.model)
        self._log(f"init from vLLM's {mode} trainer")
        return self._delegate.parse_init_info(init_dict)

    def parse_update_info(self, update_dict: dict[str, Any]) -> Any:
        if self._delegate is not None:
            return self._delegate.parse_update_info(update_dict)
        return super().parse_update_info(update_dict)

    def set_weight_update_target(self, model: Any, model_config: Any) -> None:
        super().set_weight_update_target(model, model_config)
        if self._delegate is not None:
            self._delegate.set_weight_update_target(model, model_config)

    def drain_pending(self) -> None:
        if self._delegate is not None:
            self._delegate.drain_pending()

    def reset_weight_update_target(self) -> None:
        super().reset_weight_update_target()
        if self._delegate is not None:
            self._delegate.reset_weight_update_target()

    def _where(self) -> str:
        parallel = self.parallel_config
        where = f"dp{getattr(parallel, 'data_parallel_index', 0)}"
        if getattr(parallel, "world_size", 1) > 1:  # several workers per engine (tensor parallel)
            where += f" rank{_engine_rank(parallel.world_size)}"
        return f"{where} pid {os.getpid()}"

    def _log(self, text: str) -> None:
        # One write per whole line: the engines share the log, and a print's text and newline
        # written apart let another engine's line in between (the per-rank judge reads these).
        sys.stderr.write(f"{LOG_PREFIX} {text} ({self._where()})\n")
        sys.stderr.flush()

    def init_transfer_engine(self, init_info: Any) -> None:
        if self._delegate is not None:
            self._delegate.init_transfer_engine(init_info)
            return
        self._log(f"init from trainer {init_info.trainer!r}")

    def start_weight_update(self) -> None:
        if self._delegate is not None:
            self._delegate.start_weight_update()
            return
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        if self._delegate is not None:
            self._delegate.finish_weight_update()
            return
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def receive_weights(self, update_info: Any) -> None:
        if self._delegate is not None:
            self._delegate.receive_weights(update_info)
            return
        weights = read_tensors(update_info.path, update_info.names, "update_info.")
        with _no_mtp_check():
            self.model.load_weights(weights)
        self._log(f"loaded {len(weights)} tensor(s) from {os.path.basename(update_info.path)}")

    def shutdown(self) -> None:
        if self._delegate is not None:
            self._delegate.shutdown()
            self._delegate = None
        self._log("shutdown")

    @staticmethod
    def trainer_send_weights(iterator: Any, trainer_args: Any) -> None:
        """Abstract in vLLM 0.27 (gone from 0.28): a backend that lacks it cannot be built there.
        The suite's trainer side is fixtures/observing/weight_sync.py, not this."""
        raise NotImplementedError("the lifecycle_file backend's trainer is the conformance suite")
