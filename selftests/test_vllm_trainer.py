"""vLLM's own trainer side as a sync path (vllm_lifecycle/weight_transfer/vllm_trainer.py) and the backend's
choice of session mode (vllm_lifecycle/weight_transfer/modes.py), on stand-ins: nothing here has CUDA."""

from __future__ import annotations

import argparse
import stat
from pathlib import Path
from typing import ClassVar

import pytest

from vllm_lifecycle.weight_transfer import vllm_trainer as vt
from vllm_lifecycle.weight_transfer.modes import FILE, IPC, NCCL, init_mode
from vllm_lifecycle.weight_transfer.sync_path import SyncRefused, SyncTarget


def target(engines: int = 1, version: str | None = "B") -> SyncTarget:
    return SyncTarget("http://127.0.0.1:8000", Path("/ckpt/B"), Path("/ckpt/B/model.safetensors"),
                      "B", version, engines)


# -- which session the backend serves -----------------------------------------------------


def test_the_mode_is_read_from_the_init_message():
    assert init_mode({}) == FILE  # the suite's own init
    assert init_mode({"trainer": "conformance-suite"}) == FILE
    assert init_mode({"packed": False}) == IPC  # what vLLM's ipc trainer sends, exactly
    assert init_mode({"master_address": "127.0.0.1", "master_port": 1, "world_size": 3,
                      "rank_offset": 1, "packed": True}) == NCCL
    assert init_mode({"nccl_unique_id_b64": "..."}) == NCCL
    # a file init that happens to carry 'packed' among other keys stays the suite's
    assert init_mode({"trainer": "x", "packed": True}) == FILE


# -- pure choices --------------------------------------------------------------------------


def test_one_engine_uses_ipc_on_its_gpu_and_dp_uses_nccl_on_a_gpu_of_its_own():
    assert vt.choose_backend(1) == IPC and vt.choose_backend(2) == NCCL
    assert vt.trainer_device(IPC, 1, ["3", "5"]) == "3"
    assert vt.trainer_device(NCCL, 2, ["0", "1", "2"]) == "2"
    assert vt.nccl_world_size(2) == 3 and vt.nccl_world_size(2, tensor_parallel=2) == 5


def test_unavailable_names_the_platform_and_the_gpus_missing():
    reason = vt.unavailable("cpu", 1, [])
    assert reason and "platform 'cpu' has no CUDA device" in reason
    assert vt.unavailable("cuda", 1, ["0"]) is None
    reason = vt.unavailable("cuda", 2, ["0", "1"])
    assert reason and "needs 3 visible GPU(s)" in reason and "2 visible" in reason
    assert vt.unavailable("cuda", 2, ["0", "1", "2"]) is None


def test_the_command_carries_the_target_and_only_nccl_a_port():
    ipc = vt.trainer_command("/py", target(), IPC, None)
    assert ipc[:3] == ["/py", "-m", vt.MODULE] and "--port" not in ipc
    assert ipc[ipc.index("--version") + 1] == "B" and ipc[ipc.index("--backend") + 1] == IPC
    nccl = vt.trainer_command("/py", target(2, None), NCCL, 4242)
    assert nccl[nccl.index("--port") + 1] == "4242" and "--version" not in nccl
    assert vt.parse_args(nccl[3:]).engines == 2


def test_the_exit_status_is_the_verdict():
    vt.verdict(0, "")
    with pytest.raises(SyncRefused, match="refused /update_weights: 500"):
        vt.verdict(vt.REFUSED_EXIT, "log line\nthe server refused /update_weights: 500\n")
    with pytest.raises(RuntimeError, match="exited with 1: ImportError: no torch"):
        vt.verdict(1, "Traceback...\nImportError: no torch")


# -- the trainer's flow through vLLM's classes (stand-ins) ---------------------------------


class FakeClient:
    calls: ClassVar[list[tuple[str, object]]] = []

    def __init__(self, url: str) -> None:
        self.url = url

    def finish_weight_update(self, weight_version: str | None = None) -> None:
        FakeClient.calls.append(("finish", weight_version))


class FakeEngine:
    def __init__(self, client: FakeClient, source: object) -> None:
        self.client, self.source = client, source

    def send_weights(self) -> None:
        FakeClient.calls.append(("send", list(self.source.pairs)))  # type: ignore[attr-defined]
        self.client.finish_weight_update()  # vLLM's engines finish without a version

    def shutdown(self) -> None:
        FakeClient.calls.append(("shutdown", None))


class FakeFactory:
    inits: ClassVar[list[object]] = []

    @classmethod
    def trainer_init(cls, init_info: object, *, client: FakeClient, source: object) -> FakeEngine:
        cls.inits.append(init_info)
        return FakeEngine(client, source)


def fake_api() -> argparse.Namespace:
    return argparse.Namespace(
        HTTPVLLMWeightSyncClient=FakeClient, WeightTransferTrainerFactory=FakeFactory,
        PairsSource=lambda pairs: argparse.Namespace(pairs=pairs),
        load=lambda path: [("w", 1.0)],
        IPCTrainerInitInfo=lambda **kw: ("ipc", kw), NCCLTrainerInitInfo=lambda **kw: ("nccl", kw))


def test_the_trainer_sends_through_vllms_engine_and_commits_the_version():
    FakeClient.calls, FakeFactory.inits = [], []
    args = vt.parse_args(vt.trainer_command("/py", target(2), NCCL, 4242)[3:])
    vt.run_trainer(args, fake_api())
    assert FakeFactory.inits == [("nccl", {"rank": 0, "master_address": "127.0.0.1",
                                          "master_port": 4242, "world_size": 3})]
    assert FakeClient.calls == [("send", [("w", 1.0)]), ("finish", "B"), ("shutdown", None)]


def test_the_sync_path_runs_the_trainer_and_maps_its_exit(tmp_path):
    record = tmp_path / "argv"
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\necho "$CUDA_VISIBLE_DEVICES $@" > {record}\n'
                      f'echo "the server refused /start_weight_update: 409" >&2\nexit $FAKE_EXIT\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    sync = vt.VLLMTrainerSync(python=str(script), visible=("4", "5", "6"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FAKE_EXIT", "0")
        sync.sync(target(2))
        seen = record.read_text().split()
        assert seen[0] == "6" and seen[1:3] == ["-m", vt.MODULE] and "--port" in seen
        mp.setenv("FAKE_EXIT", str(vt.REFUSED_EXIT))
        with pytest.raises(SyncRefused, match="start_weight_update: 409"):
            sync.sync(target(1))
        assert record.read_text().split()[0] == "4"  # ipc: the engine's own GPU
