"""Every fault is caught by the behaviours it names, and by nothing else.

Each case is one child pytest run of the conformance suite (one server start), with the fault
armed through the suite's vLLM plugin. The child stops its own server; a timeout or Ctrl-C
here sends it SIGTERM, which it turns into an orderly teardown.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from faults.detection import Case, Row, cases, judge
from fixtures.launching.server import stop_process_group
from fixtures.launching.target import PROBED_ENV, handed_probe, probe_output

ROOT = Path(__file__).resolve().parent.parent
CASE_TIMEOUT_S = 1200


@functools.cache
def _probed() -> str:
    """The target every case runs against (the children's --lifecycle-python), probed once."""
    python = os.environ.get("VLLM_LIFECYCLE_PYTHON") or sys.executable
    return handed_probe(python, probe_output(python))


def run_case(case: Case, report_dir: Path) -> tuple[list[dict], Path]:
    out = report_dir / case.name
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
               "--lifecycle-report-dir", str(out), *case.pytest_args()]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LIFECYCLE_FAULT"}
    env[PROBED_ENV] = _probed()  # one probe of the target for every case (5 s each)
    log = out / "pytest.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=CASE_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                stop_process_group(proc, grace=90)
    results = out / "results.json"
    if not results.is_file():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(
            f"case {case.name}: the child run wrote no results (exit {proc.returncode}):\n{tail}")
    return json.loads(results.read_text())["results"], log


def _variant(config: pytest.Config) -> str:
    return str(config.getoption("--detection-variant"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        all_cases = cases(_variant(metafunc.config))
        metafunc.parametrize("case", all_cases, ids=[c.name for c in all_cases])


def test_fault_is_caught(case: Case, report_dir: Path, matrix: list[Row], record_property) -> None:
    records, log = run_case(case, report_dir)
    row = judge(case, records)
    matrix.append(row)
    record_property("detection_row", json.dumps(row.as_dict()))
    assert row.ok, f"{case.name}: " + "; ".join(row.problems()) + f" (child log: {log})"
