"""GPU readiness without a GPU: the device-memory behaviours end to end on a fake CUDA target.

The whole plugin runs in a child pytest against a stand-in interpreter whose probe says
"cuda" and whose server is selftests/fake_server.py in FAKE_POST=vllm mode: vLLM 0.32's
lifecycle bodies, and the device memory it maps written to a file that the stand-in pynvml
(selftests/fake_nvml) reads. The allocator child of memory-freed-for-others runs the suite's
real ALLOCATOR code against a stand-in torch over the same file. So plumbing (NVML read in
the suite's process, sizes parsed from the startup log, staged wakes, reload_weights),
units (bytes) and judges meet before the first GPU run; each broken fake must fail the
behaviour that is about it, with the measurement that caught it named.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from selftests.conftest import write_fake_python

ROOT = Path(__file__).resolve().parent.parent
FAKE_NVML = Path(__file__).with_name("fake_nvml")
PROBE = {"distribution": "vllm", "vllm_version": "0.32.0", "torch_version": "2.13.0",
         "platform": "cuda", "has_triton": True, "cuda_available": True, "device_name": "fake",
         "sleep_mode_available": True}
SELECTION = "MRV1 and (device_memory or memory_freed_for_others)"
PER_LEVEL = "test_device_memory_per_level"
STABLE = "test_device_memory_stable"
FREED = "test_memory_freed_for_others"


def fake_python(tmp_path: Path) -> Path:
    """The fake target's interpreter; the allocator (-c CODE BYTES) runs under the stand-in torch."""
    allocator = (f"if [ \"$1\" = \"-c\" ] && [ $# -gt 2 ]; then PYTHONPATH={FAKE_NVML / 'allocator'} "
                 f"exec {sys.executable} \"$@\"; fi\n")
    return write_fake_python(tmp_path, PROBE, before=allocator)


def run_gpu_suite(tmp_path: Path, fault: str = "", nvml: bool = True,
                  **sizes: str) -> tuple[dict[str, dict[str, Any]], str]:
    """The device-memory behaviours on the fake CUDA target; their records by test name."""
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_LIFECYCLE", "FAKE_"))}
    env |= {"FAKE_POST": "vllm", "FAKE_GPU_FAULT": fault, "FAKE_NVML_STATE": str(tmp_path / "nvml.json"),
            "CUDA_VISIBLE_DEVICES": "0", "PYTHONDONTWRITEBYTECODE": "1"} | sizes
    if nvml:  # the suite reads NVML in its own process: the stand-in goes first on its path
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(FAKE_NVML), env.get("PYTHONPATH")) if p)
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
               "-k", SELECTION, "--lifecycle-transports", "http",
               "--lifecycle-python", str(fake_python(tmp_path)), "--lifecycle-model", "fake",
               "--lifecycle-report-dir", str(report), "--lifecycle-request-timeout", "30",
               "--lifecycle-start-timeout", "60"]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    out = proc.stdout + proc.stderr
    results = json.loads((report / "results.json").read_text())
    ran = {r["nodeid"].split("::")[-1].split("[")[0]: r for r in results["results"]
           if r["outcome"] != "notrun"}
    return ran, out


def measured(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in record.get("measurements", [])}


def test_a_correct_gpu_engine_passes_every_device_memory_behaviour(tmp_path):
    ran, out = run_gpu_suite(tmp_path)
    assert {name: r["outcome"] for name, r in ran.items()} == {PER_LEVEL: "pass", STABLE: "pass",
                                                               FREED: "pass"}, out
    per_level = measured(ran[PER_LEVEL])
    # Units meet: fractions of the logged sizes come out whole, bytes stay bytes.
    for level in (1, 2):
        assert per_level[f"weights_released_fraction_level{level}"]["observed"] == pytest.approx(1.0)
        assert per_level[f"kv_released_fraction_level{level}"]["observed"] == pytest.approx(1.0)
        assert per_level[f"wake_return_fraction [level {level}]"]["observed"] == pytest.approx(0.0)
    assert per_level["freed_bytes_level0"]["observed"] == 0
    assert measured(ran[STABLE])["residual_growth_per_cycle"]["observed"] == 0
    assert measured(ran[FREED])["allocatable_fraction"]["observed"] >= 1.0


# On a KV-dominated device a wake without the weights ends within 5 % of the pre-sleep use and
# regains over 90 % of weights + KV: only the staged weights wake shows the weights missing.
H200 = {"FAKE_GPU_KV_GIB": "110", "FAKE_GPU_TOTAL_GIB": "141"}


@pytest.mark.parametrize(("fault", "sizes", "test", "measurement"), [
    ("sleep-keeps-weights", {}, PER_LEVEL, "weights_released_fraction_level1"),
    ("wake-skips-weights", {}, PER_LEVEL, "wake_return_fraction [level 1]"),
    ("wake-skips-weights", H200, PER_LEVEL, "weights_released_fraction_level1"),
    ("leak", {}, STABLE, "residual_growth_per_cycle"),
    ("regrab", {}, FREED, "allocatable_fraction"),
], ids=["sleep-keeps-weights", "wake-skips-weights", "wake-skips-weights-kv-dominated", "leak", "regrab"])
def test_a_broken_gpu_engine_fails_the_behaviour_about_it(tmp_path, fault, sizes, test, measurement):
    ran, out = run_gpu_suite(tmp_path, fault, **sizes)
    record = ran[test]
    assert record["outcome"] == "fail", out
    assert f"{record['behaviour']} {measurement}: observed" in record["message"], record["message"]
    assert not measured(record)[measurement]["ok"]
    assert "error" not in {r["outcome"] for r in ran.values()}, out


def test_a_gpu_engine_started_without_sleep_mode_is_an_error_not_a_fail(tmp_path):
    """The launch passes --enable-sleep-mode; an engine whose own report leaves it out is a
    misconfigured launch: every test on it errors at the start, none fails the engine."""
    ran, out = run_gpu_suite(tmp_path, FAKE_SLEEP_MODE="off")
    assert {r["outcome"] for r in ran.values()} == {"error"} and len(ran) == 3, out
    assert all("the platform has sleep mode but the engine reports enable_sleep_mode=False"
               in r["message"] for r in ran.values()), out


def test_a_cuda_target_without_pynvml_is_an_error_not_a_skip(tmp_path):
    ran, out = run_gpu_suite(tmp_path, nvml=False)
    assert {r["outcome"] for r in ran.values()} == {"error"} and len(ran) == 3, out
    assert all("needs nvidia-ml-py (import pynvml)" in r["message"] for r in ran.values()), out


def test_device_utilization_is_read_through_nvml_and_judged_per_device(tmp_path, monkeypatch):
    """topology/quiescent-after-pause on a GPU: every rank's device utilization over the window
    (the stand-in pynvml serves a scripted percent), judged against busy_device_percent."""
    from fixtures.judging import topology_judges as tj
    from fixtures.observing import device
    from thresholds import Limit

    state = tmp_path / "nvml.json"
    state.write_text(json.dumps({"used": 0, "total": 1 << 30, "utilization": 37}))
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    monkeypatch.syspath_prepend(str(FAKE_NVML))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    assert device.engine_devices({"CUDA_VISIBLE_DEVICES": "0, 3"}) == ["0", "3"]
    assert device.busy_percent(["0"], 0.3, interval=0.1) == {"0": 37}
    limit = Limit("topology/quiescent-after-pause", "busy_device_percent", "<=", 5, "%", "r")
    busy = tj.device_quiescence({"0": 37, "1": 0}, limit, "after /pause?mode=abort on an idle engine")
    assert [m.describe() for m in busy if not m.ok] == [
        "topology/quiescent-after-pause busy_device_percent [after /pause?mode=abort on an idle "
        "engine, device 0]: observed 37 %, limit <= 5 (beyond by 32)"]
    import pynvml

    with pytest.raises(pynvml.NVMLError, match="Invalid Argument"):
        device.busy_percent(["1"], 0.1)  # the stand-in has one device: NVML refuses another


# -- a CUDA target without NVML is a harness error, not "0 GPUs" (issue 22, hole 6) ----------

def test_gpu_count_on_cuda_needs_nvml(monkeypatch):
    from fixtures.errors import HarnessError
    from fixtures.launching.environments import gpu_count

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    with pytest.raises(HarnessError, match="platform 'cuda': cannot count GPUs through NVML"):
        gpu_count("cuda")
    assert gpu_count("cpu") == 0  # NVML sees nothing of a CPU target: 0 is the truth there


def test_gpu_count_on_cuda_reports_a_failing_nvml(monkeypatch, tmp_path):
    from fixtures.errors import HarnessError
    from fixtures.launching.environments import gpu_count

    monkeypatch.syspath_prepend(str(FAKE_NVML))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    with pytest.raises(HarnessError, match=r"cannot count GPUs through NVML.*Driver Not Loaded"):
        gpu_count("cuda")  # the fake without device state fails nvmlInit as NVML does
    state = tmp_path / "nvml.json"
    state.write_text("{}")
    monkeypatch.setenv("FAKE_NVML_STATE", str(state))
    assert gpu_count("cuda") == 1  # the fake's one device
    import pynvml

    def broken() -> int:
        raise pynvml.NVMLError("Unknown Error")

    monkeypatch.setattr(pynvml, "nvmlDeviceGetCount", broken)
    with pytest.raises(HarnessError, match=r"NVML failed to count GPUs.*Unknown Error"):
        gpu_count("cuda")
    assert gpu_count("xpu") == 0
