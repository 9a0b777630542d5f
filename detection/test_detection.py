"""Every fault is caught by the behaviours it names, and by nothing else.

Each case is one child pytest run of the conformance suite with the fault armed through the
suite's vLLM plugin, run in the background (detection/lanes.py); each test judges its own
case's run. A timeout, a failure or Ctrl-C here sends the child SIGTERM, which it turns into an
orderly teardown (it stops its own server).
"""

from __future__ import annotations

import json

import pytest

from detection.cases import Case, Row, cases, judge
from detection.lanes import Lanes


def _variant(config: pytest.Config) -> str:
    return str(config.getoption("--detection-variant"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" in metafunc.fixturenames:
        all_cases = cases(_variant(metafunc.config))
        metafunc.parametrize("case", all_cases, ids=[c.name for c in all_cases])


def test_fault_is_caught(case: Case, lanes: Lanes, matrix: list[Row], record_property) -> None:
    records, log = lanes.result(case.name)
    row = judge(case, records)
    matrix.append(row)
    record_property("detection_row", json.dumps(row.as_dict()))
    assert row.ok, f"{case.name}: " + "; ".join(row.problems()) + f" (child log: {log})"
