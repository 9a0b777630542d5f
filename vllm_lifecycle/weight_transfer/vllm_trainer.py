"""vLLM's own trainer side as a sync path: the `ipc` backend for one engine, `nccl` under data
parallelism, driven over the server's weight routes by vLLM's `HTTPVLLMWeightSyncClient`.

`VLLMTrainerSync` runs in the suite's pytest process (no torch) and starts `main` in the
target's interpreter, which loads the checkpoint onto the trainer's GPU, builds vLLM's trainer
engine (`WeightTransferTrainerFactory.trainer_init`), calls `send_weights` and commits the
version; its exit status is the verdict. The server's backend hands the session to vLLM's own
worker-side engine (modes.py). Only a GPU shows CUDA IPC handles (the trainer sits on the
engine's GPU: handles are keyed by GPU UUID) and an NCCL broadcast to every DP rank (the
trainer needs a GPU of its own); elsewhere `unavailable` says why, and the tests skip.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_lifecycle.weight_transfer.modes import IPC, NCCL
from vllm_lifecycle.weight_transfer.sync_path import SyncRefused, SyncTarget

MODULE = "vllm_lifecycle.weight_transfer.vllm_trainer"
REFUSED_EXIT = 3  # the server answered a call with an error status: the engine's verdict
# IPC handles are not JSON: vLLM's HTTP client pickles them, and the worker unpickles them
# only with this set (vllm/distributed/weight_transfer/ipc_engine.py).
SERVER_ENV = {"VLLM_ALLOW_INSECURE_SERIALIZATION": "1"}
TIMEOUT_S = 600.0


def choose_backend(engines: int) -> str:
    """ipc reaches one engine on the trainer's own GPU; several DP engines need nccl."""
    return IPC if engines == 1 else NCCL


def nccl_world_size(engines: int, tensor_parallel: int = 1) -> int:
    """The trainer (rank 0) and every worker of every DP engine (vLLM gives worker ranks
    dp_index * TP * PP + rank + 1; nccl_common.py)."""
    return 1 + engines * tensor_parallel


def trainer_device(backend: str, engines: int, visible: Sequence[str]) -> str:
    """The GPU the trainer uses: ipc shares the engine's own (first) GPU; nccl takes the first
    GPU after the engines'."""
    return visible[0] if backend == IPC else visible[engines]


def unavailable(platform: str, engines: int, visible: Sequence[str]) -> str | None:
    """Why vLLM's trainer cannot run against this target (None: it can)."""
    if platform != "cuda":
        return (f"vLLM's ipc and nccl trainers move CUDA tensors (CUDA IPC handles, an NCCL "
                f"broadcast); platform {platform!r} has no CUDA device, and the session runs "
                f"through the suite's file backend here")
    backend = choose_backend(engines)
    need = engines if backend == IPC else engines + 1
    if len(visible) < need:
        return (f"vLLM's {backend} trainer for {engines} engine(s) needs {need} visible GPU(s) "
                f"(nccl: one more than the engines, NCCL refuses two ranks on one device); "
                f"{len(visible)} visible")
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def trainer_command(python: str, target: SyncTarget, backend: str, port: int | None) -> list[str]:
    command = [python, "-m", MODULE, "--url", target.url, "--weights-file", str(target.weights_file),
               "--engines", str(target.engines), "--backend", backend]
    if target.version is not None:
        command += ["--version", target.version]
    if port is not None:
        command += ["--port", str(port)]
    return command


def verdict(returncode: int, output: str) -> None:
    """The trainer's exit: 0 the sync landed; REFUSED_EXIT the engine refused a call (the
    test fails); anything else the trainer itself broke (a harness error)."""
    if returncode == 0:
        return
    tail = output.strip().splitlines()[-1:] or ["(no output)"]
    if returncode == REFUSED_EXIT:
        raise SyncRefused(tail[0])
    raise RuntimeError(f"vLLM's trainer exited with {returncode}: {tail[0]}")


@dataclass(frozen=True)
class VLLMTrainerSync:
    """The sync path (vllm_lifecycle/weight_transfer/sync_path.py) that drives vLLM's own trainer side."""

    python: str  # the target's interpreter: it has torch with CUDA and vLLM
    visible: tuple[str, ...]  # the GPUs the run may use, the engines' first

    def sync(self, target: SyncTarget) -> None:
        backend = choose_backend(target.engines)
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = trainer_device(backend, target.engines, self.visible)
        root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        port = free_port() if backend == NCCL else None
        done = subprocess.run(trainer_command(self.python, target, backend, port), env=env,
                              capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        verdict(done.returncode, done.stdout + done.stderr)


# -- the trainer process (the target's interpreter) -----------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}")
    parser.add_argument("--url", required=True)
    parser.add_argument("--weights-file", required=True, type=Path)
    parser.add_argument("--engines", required=True, type=int)
    parser.add_argument("--backend", required=True, choices=[IPC, NCCL])
    parser.add_argument("--version")
    parser.add_argument("--port", type=int)
    return parser.parse_args(argv)


def init_info(api: Any, args: argparse.Namespace) -> Any:
    """vLLM's trainer init info for the backend (rank 0 is the sender)."""
    if args.backend == IPC:
        return api.IPCTrainerInitInfo(rank=0)
    return api.NCCLTrainerInitInfo(rank=0, master_address="127.0.0.1", master_port=args.port,
                                   world_size=nccl_world_size(args.engines))


def run_trainer(args: argparse.Namespace, api: Any) -> None:
    """One sync through vLLM's trainer: `api` holds vLLM's classes (a stand-in in the
    self-tests). The version is committed by finish, as the suite's own session does."""
    client = api.HTTPVLLMWeightSyncClient(args.url)
    finish = client.finish_weight_update
    client.finish_weight_update = lambda weight_version=None: finish(weight_version or args.version)
    source = api.PairsSource(api.load(args.weights_file))
    engine = api.WeightTransferTrainerFactory.trainer_init(init_info(api, args), client=client,
                                                           source=source)
    try:
        engine.send_weights()
    finally:
        engine.shutdown()


def _vllm_api() -> Any:  # pragma: no cover - needs torch with CUDA and vLLM
    import torch
    from safetensors.torch import load_file
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource
    from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
    from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
    from vllm.distributed.weight_transfer.ipc_engine import IPCTrainerInitInfo
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    class PairsSource(WeightSource):  # type: ignore[misc]
        """The checkpoint's tensors, replayed in the same order on every pass."""

        def __init__(self, pairs: list[tuple[str, Any]]) -> None:
            self.pairs = pairs

        def metadata(self) -> list[Any]:
            return [ParamMeta(n, t.dtype, tuple(t.shape)) for n, t in self.pairs]

        def __iter__(self) -> Any:
            return iter(self.pairs)

    def load(path: Path) -> list[tuple[str, Any]]:
        return sorted(load_file(str(path), device="cuda:0").items())

    torch.cuda.set_device(0)
    return argparse.Namespace(
        HTTPVLLMWeightSyncClient=HTTPVLLMWeightSyncClient, PairsSource=PairsSource, load=load,
        WeightTransferTrainerFactory=WeightTransferTrainerFactory,
        IPCTrainerInitInfo=IPCTrainerInitInfo, NCCLTrainerInitInfo=NCCLTrainerInitInfo)


def main(argv: Sequence[str] | None = None) -> int:  # pragma: no cover - the target's side
    args = parse_args(argv)
    api = _vllm_api()
    import requests

    try:
        run_trainer(args, api)
    except requests.HTTPError as exc:
        body = exc.response.text[:300] if exc.response is not None else ""
        print(f"the server refused {exc.request.url if exc.request else 'a call'}: {exc} {body}",
              file=sys.stderr)
        return REFUSED_EXIT
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
