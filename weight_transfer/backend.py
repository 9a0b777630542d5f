"""A weight-transfer backend that moves real tensors on any platform: the trainer names a
safetensors file (and which of its tensors a chunk carries), the worker reads them and loads
them through the model's own weight loaders inside vLLM's layerwise reload, as the built-in
ipc and nccl backends do between their start and finish.

Imported only inside vLLM worker processes (torch and vLLM are there).
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


class FileWeightTransferEngine(WeightTransferEngine[FileInitInfo, FileUpdateInfo]):
    init_info_cls = FileInitInfo
    update_info_cls = FileUpdateInfo

    def _where(self) -> str:
        parallel = self.parallel_config
        return f"dp{getattr(parallel, 'data_parallel_index', 0)} pid {os.getpid()}"

    def _log(self, text: str) -> None:
        print(f"{LOG_PREFIX} {text} ({self._where()})", file=sys.stderr, flush=True)

    def init_transfer_engine(self, init_info: FileInitInfo) -> None:
        self._log(f"init from trainer {init_info.trainer!r}")

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def receive_weights(self, update_info: FileUpdateInfo) -> None:
        from safetensors import safe_open

        if not update_info.path or not os.path.isfile(update_info.path):
            raise ValueError(f"update_info.path {update_info.path!r} is not a readable file")
        with safe_open(update_info.path, framework="pt") as reader:
            available = set(reader.keys())
            names = list(update_info.names) if update_info.names is not None else sorted(available)
            missing = [n for n in names if n not in available]
            if missing:
                raise ValueError(f"update_info.names not in {update_info.path}: {missing[:5]}")
            weights = [(name, reader.get_tensor(name)) for name in names]
        with _no_mtp_check():
            self.model.load_weights(weights)
        self._log(f"loaded {len(weights)} tensor(s) from {os.path.basename(update_info.path)}")

    def shutdown(self) -> None:
        self._log("shutdown")

    @staticmethod
    def trainer_send_weights(iterator: Any, trainer_args: Any) -> None:
        """Abstract in vLLM 0.27 (gone from 0.28): a backend that lacks it cannot be built there.
        The suite's trainer side is fixtures/observing/weight_sync.py, not this."""
        raise NotImplementedError("the lifecycle_file backend's trainer is the conformance suite")
