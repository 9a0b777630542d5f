"""The whole plugin end to end on a fake target: a server that dies mid-test, and a run cut by
SIGTERM (a CI timeout) or Ctrl-C. No vLLM: a stand-in interpreter answers the preflight probe
and launches the fake server."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.observing import server_log
from selftests.conftest import CPU_PROBE, FAKE_SERVER, write_fake_python

ROOT = Path(__file__).resolve().parent.parent
PROBE = CPU_PROBE


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    return write_fake_python(tmp_path, PROBE)


def run_suite(fake_python: Path, report: Path, keyword: str, post: str, **popen: object):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_LIFECYCLE", "FAKE_"))}
    env |= {"FAKE_POST": post, "PYTHONDONTWRITEBYTECODE": "1"}
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
               "-k", keyword, "--lifecycle-python", str(fake_python), "--lifecycle-model", "fake",
               "--lifecycle-report-dir", str(report), "--lifecycle-request-timeout", "60",
               "--lifecycle-start-timeout", "60"]
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **popen)


def fake_servers_alive(report: Path) -> list[int]:
    """Fake servers of this run still running, found by the ports their logs name."""
    ports = set()
    for log in (report / "server-logs").glob("*.log"):
        words = log.read_text(errors="replace").split()
        ports |= {words[i + 1] for i, w in enumerate(words[:-1]) if w == "--port"}
    alive = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            words = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if str(FAKE_SERVER) in words and "--port" in words and words[words.index("--port") + 1] in ports:
            alive.append(int(proc.name))
    return alive


def test_a_server_that_dies_mid_test_is_an_error_and_the_run_goes_on(fake_python, tmp_path):
    report = tmp_path / "report"
    proc = run_suite(fake_python, report, "MRV1-eager and (awake_baseline or test_pause_resume)", "die")
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 1, out
    results = json.loads((report / "results.json").read_text())
    outcomes = {r["nodeid"]: r["outcome"] for r in results["results"] if r["outcome"] != "notrun"}
    assert outcomes and set(outcomes.values()) == {"error"}, outcomes
    assert any("ServerDiedError" in r["message"] for r in results["results"]
               if r["outcome"] == "error"), out
    assert results["servers"]["starts"] >= 2, "the run did not go on with a fresh server"
    assert "server log tail" in out and "fake server: dying on a POST" in out
    assert "CONFORMANCE FAIL" in results["verdict"]
    junit = (report / "junit.xml").read_text()
    assert '<property name="behaviour" value="flags/awake-baseline"' in junit
    assert (report / "report.html").is_file() and (report / "report.md").is_file()


def _run_fatal(tmp_path: Path, fatal_error: str | None = None
               ) -> tuple[subprocess.CompletedProcess[str], list[dict]]:
    """The pause/resume test against a fake engine whose loop dies on /pause (its log names
    `fatal_error`, else a layer left on meta)."""
    from selftests.test_gpu_readiness import FAKE_NVML
    from selftests.test_gpu_readiness import fake_python as gpu_python

    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_LIFECYCLE", "FAKE_"))}
    if fatal_error is not None:
        env["FAKE_FATAL_ERROR"] = fatal_error
    env |= {"FAKE_POST": "vllm", "FAKE_FATAL_ON": "/pause", "FAKE_NVML_STATE": str(tmp_path / "nvml.json"),
            "CUDA_VISIBLE_DEVICES": "0", "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONPATH": os.pathsep.join(p for p in (str(FAKE_NVML), env.get("PYTHONPATH")) if p)}
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
               "-k", "MRV1-eager and test_pause_resume and keep", "--lifecycle-transports", "http",
               "--lifecycle-python", str(gpu_python(tmp_path)), "--lifecycle-model", "fake",
               "--lifecycle-report-dir", str(report), "--lifecycle-request-timeout", "30",
               "--lifecycle-start-timeout", "60"]
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    results = json.loads((report / "results.json").read_text())
    return proc, [r for r in results["results"] if r["outcome"] != "notrun"]


def test_an_engine_that_reports_its_own_death_fails_the_test_it_ran(tmp_path):
    """The engine's log says its loop died: the test that was running is the engine's failure
    with the cause, not a harness error (hole 13 of the honesty issue)."""
    proc, ran = _run_fatal(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ran and {r["outcome"] for r in ran} == {"fail"}, [(r["outcome"], r["message"][:600]) for r in ran]
    assert all(r["message"].startswith("the engine died during the test: EngineCore encountered a "
                                       "fatal error: RuntimeError: Tensor on device cpu is not on the "
                                       "expected device meta!") for r in ran), ran


def test_a_death_on_a_compiled_op_the_kernels_lack_is_an_error_naming_it(tmp_path):
    """An overlay's newer Python calling an op the older kernels lack: the environment broke,
    not the engine, however its loop reported it."""
    proc, ran = _run_fatal(tmp_path, "AttributeError: '_OpNamespace' '_C' object has no attribute "
                                     "'new_kernel'")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert ran and {r["outcome"] for r in ran} == {"error"}, [(r["outcome"], r["message"][:600]) for r in ran]
    assert "the kernels lack compiled op _C::new_kernel" in proc.stdout, proc.stdout[-3000:]


def test_the_engine_death_is_read_from_its_own_log():
    from fixtures.observing.server_log import engine_death

    log = ("(APIServer pid=1) INFO ready\n"
           "(EngineCore_DP0 pid=2) ERROR 12-03 08:35:15 [core.py:1512] EngineCore encountered a "
           "fatal error.\n(EngineCore_DP0 pid=2) Traceback (most recent call last):\n"
           "(EngineCore_DP0 pid=2)     raise TimeoutError(msg)\n"
           "(EngineCore_DP0 pid=2) TimeoutError: RPC call to execute_model timed out.\n"
           "(EngineCore_DP0 pid=2) \n(EngineCore_DP0 pid=2) The above exception was the direct "
           "cause of the following exception:\n(EngineCore_DP0 pid=2) vllm.v1.engine.exceptions."
           "EngineDeadError: EngineCore encountered an issue.\n")
    assert engine_death(log) == ("EngineCore encountered a fatal error: TimeoutError: RPC call to "
                                 "execute_model timed out.")
    assert engine_death("(Worker pid=3) Worker proc died unexpectedly (exit code: -9)") is None
    assert engine_death("EngineCore encountered a fatal error.\n") == "EngineCore encountered a fatal error"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["ci-timeout", "ctrl-c"])
def test_an_interrupted_run_leaves_a_report_and_no_server(fake_python, tmp_path, sig):
    report = tmp_path / "report"
    proc = run_suite(fake_python, report, "MRV1-eager and awake_baseline", "hang")
    try:
        deadline = time.monotonic() + 120
        while not fake_servers_alive(report) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert fake_servers_alive(report), "the fake server never started"
        time.sleep(3)  # the test is now blocked on a POST that never answers
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:  # this test failed early: end the run it started, orderly
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=120)
    assert proc.returncode != 0, out
    results = json.loads((report / "results.json").read_text())
    assert results["verdict"].startswith("CONFORMANCE FAIL"), results["verdict"]
    time.sleep(1)
    assert not fake_servers_alive(report), f"a server outlived the interrupted run:\n{out}"


def test_a_hung_engine_is_cut_by_the_request_timeout(fake_manager):
    from fixtures.observing.api_shape import ApiShape
    from fixtures.observing.client import ControlPlane
    from selftests.conftest import fake_config

    server = fake_manager.acquire(fake_config(FAKE_POST="hang"))
    control = ControlPlane(server.url, timeout=1.0, ensure_alive=server.ensure_alive,
                           shape=ApiShape())
    began = time.monotonic()
    with pytest.raises(AssertionError, match="got no answer within 1 s"):
        control.pause("abort")
    assert time.monotonic() - began < 10
    fake_manager.release()  # the whole group goes, the hung handler with it
    assert not server.alive()


def test_a_harness_error_inside_a_tentative_test_is_an_error_not_a_tentative_fail(fake_python, tmp_path):
    # The fake answers /v1/completions without a key: the API-key test's precondition breaks.
    report = tmp_path / "report"
    proc = run_suite(fake_python, report, "MRV1-eager and api_key", "ok")
    out, _ = proc.communicate(timeout=300)
    results = json.loads((report / "results.json").read_text())
    ran = [r for r in results["results"] if r["outcome"] != "notrun"]
    assert [r["outcome"] for r in ran] == ["error"], out
    assert "the key is not in force" in ran[0]["message"] and proc.returncode == 1


def test_the_added_request_lines_name_the_ids_vllm_added():
    lines = ["(APIServer pid=9) INFO 12-06 20:19:11 [async_llm.py:578] Added request "
             "cmpl-arrived-1a2b-0-84f22ddb.",
             "(APIServer pid=9) INFO 12-06 20:19:11 [request_logger.py:65] Received request "
             "cmpl-arrived-3c4d-0: params: SamplingParams(n=1)"]
    added = server_log.added_requests(lines)
    assert added == {"cmpl-arrived-1a2b-0-84f22ddb"}
    # received is not added: the request may not be on the engine's socket yet
    assert server_log.added_as("arrived-1a2b", added)
    assert not server_log.added_as("arrived-3c4d", added)
    assert not server_log.added_as("arrived-1a", added)
