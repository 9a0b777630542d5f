"""The path RL frameworks sync weights through today: a worker extension (`--worker-extension-cls`)
whose methods the trainer calls with `collective_rpc`, each reading a safetensors file it names:
`lifecycle_reload_tensors` through vLLM's layerwise reload (the layers re-processed after
loading, as the session backends do), `lifecycle_load_tensors` through the model's own
`load_weights` (the older pattern). Imported only inside vLLM worker processes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

LOG_PREFIX = "vllm-lifecycle-weights:"


def read_tensors(path: str, names: list[str] | None, field: str = "") -> list[tuple[str, Any]]:
    """The named tensors of a safetensors file (None: all); `field` prefixes the errors' names."""
    from safetensors import safe_open

    if not path or not os.path.isfile(path):
        raise ValueError(f"{field}path {path!r} is not a readable file")
    with safe_open(path, framework="pt") as reader:
        available = set(reader.keys())
        chosen = list(names) if names is not None else sorted(available)
        missing = [n for n in chosen if n not in available]
        if missing:
            raise ValueError(f"{field}names not in {path}: {missing[:5]}")
        return [(name, reader.get_tensor(name)) for name in chosen]


class LifecycleWorkerExtension:
    """Mixed into vLLM's worker class (so `self.model_runner` is the worker's)."""

    model_runner: Any

    def _log(self, text: str) -> None:
        print(f"{LOG_PREFIX} extension: {text} (pid {os.getpid()})", file=sys.stderr, flush=True)

    def lifecycle_reload_tensors(self, path: str, names: list[str] | None = None) -> int:
        """In-place reload through vLLM's layerwise reload; returns the tensors loaded."""
        weights = read_tensors(path, names)
        self.model_runner.reload_weights(weights_iterator=iter(weights))
        self._log(f"reloaded {len(weights)} tensor(s) from {os.path.basename(path)}")
        return len(weights)

    def lifecycle_load_tensors(self, path: str, names: list[str] | None = None) -> int:
        """The model's own load_weights, nothing re-processed after; returns the tensors loaded."""
        weights = read_tensors(path, names)
        self.model_runner.model.load_weights(weights=weights)
        self._log(f"loaded {len(weights)} tensor(s) directly from {os.path.basename(path)}")
        return len(weights)
