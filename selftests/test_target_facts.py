"""The target facts name the vLLM under test: its version and where it is installed."""

from __future__ import annotations

import json
import sys

import pytest

from fixtures.launching import target as target_mod
from fixtures.launching.target import _MARK, describe, parse_probe_output

PROBE = {"distribution": "vllm", "vllm_version": "0.34.0.dev12+g1a2b3c.cpu", "torch_version": "2.9.0+cpu",
         "platform": "cpu", "has_triton": False, "cuda_available": False, "device_name": None,
         "vllm_location": "/src/vllm/vllm", "sleep_mode_available": False}


def test_the_location_is_a_target_fact_recorded_and_described():
    info = parse_probe_output("py", "noise\n" + _MARK + json.dumps(PROBE) + "\n")
    assert info.vllm_location == "/src/vllm/vllm" and info.as_dict()["vllm_location"] == "/src/vllm/vllm"
    assert describe(info).startswith("vLLM 0.34.0.dev12+g1a2b3c.cpu (vllm) at /src/vllm/vllm, python py")
    older = parse_probe_output("py", _MARK + json.dumps({k: v for k, v in PROBE.items()
                                                         if k != "vllm_location"}))
    assert older.vllm_location is None and "at an unknown location" in describe(older)


def test_the_command_names_a_target_without_vllm_in_one_line(capsys):
    assert target_mod.main([sys.executable + "-missing"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("no vLLM to test: target python ") and err.count("\n") == 1
    assert "VLLM_LIFECYCLE_PYTHON" in err


def test_the_probe_reports_where_vllm_is_installed():
    vllm = pytest.importorskip("vllm", reason="vLLM is not installed here (the cpu/installed envs have it)")
    from pathlib import Path

    info = target_mod.probe_target(sys.executable)
    assert info.vllm_location == str(Path(vllm.__file__).resolve().parent)
    assert info.vllm_version == vllm.__version__
    # vLLM's platform says whether it has sleep mode; the CPU platform has none.
    assert info.sleep_mode_available is (info.platform in ("cuda", "rocm", "xpu"))


def test_a_handed_down_probe_is_used_only_for_the_same_interpreter(monkeypatch):
    from fixtures.errors import HarnessError
    from fixtures.launching.target import PROBED_ENV, handed_probe, probe_target

    stdout = _MARK + json.dumps(PROBE) + "\n"
    monkeypatch.setenv(PROBED_ENV, handed_probe("/no/such/python", stdout))
    assert probe_target("/no/such/python") == parse_probe_output("/no/such/python", stdout)
    # Not handed down for this interpreter, or refused (a certified run): it is probed anew.
    for python, reuse in (("/no/other/python", True), ("/no/such/python", False)):
        with pytest.raises(HarnessError, match=f"target python '{python}' does not exist"):
            probe_target(python, reuse=reuse)
    monkeypatch.setenv(PROBED_ENV, "{not json")
    with pytest.raises(HarnessError, match=f"{PROBED_ENV} is not a probe handed down"):
        probe_target("/no/such/python")
