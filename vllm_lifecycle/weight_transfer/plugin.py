"""The vLLM general-plugin entry point: register the suite's weight-transfer backend by name, in
each of vLLM's processes. Stdlib only at import: the backend (torch, vLLM) is imported only
where a worker builds the engine, so a process that never syncs pays nothing.
"""

from __future__ import annotations

BACKEND_NAME = "lifecycle_file"
BACKEND_MODULE = "vllm_lifecycle.weight_transfer.backend"
BACKEND_CLASS = "FileWeightTransferEngine"


def register() -> None:
    try:
        from vllm.distributed.weight_transfer.factory import WeightTransferEngineFactory
    except ImportError:  # a vLLM without the weight-transfer API: nothing to register
        return
    # vLLM may load general plugins more than once in one process (LLM with the in-process
    # engine); a second registration of the same name raises.
    if BACKEND_NAME not in WeightTransferEngineFactory._registry:
        WeightTransferEngineFactory.register_engine(BACKEND_NAME, BACKEND_MODULE, BACKEND_CLASS)
