"""The detection self-test: run slices of the conformance suite against the real target with
one known fault armed each, and write the detection matrix (fault x behaviour)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.detection import Row, cases, matrix_markdown

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("detection", "fault detection self-test")
    group.addoption("--detection-report-dir", default=None,
                    help="folder for the matrix and each case's run (default: reports/detection-<UTC time>)")
    group.addoption("--detection-variant", default="MRV1-eager",
                    help="the variant the faults are injected into (default: MRV1-eager)")


@pytest.fixture(scope="session")
def report_dir(pytestconfig: pytest.Config) -> Path:
    chosen = pytestconfig.getoption("--detection-report-dir")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = Path(chosen) if chosen else ROOT / "reports" / f"detection-{stamp}"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


@pytest.fixture(scope="session")
def matrix(report_dir: Path, pytestconfig: pytest.Config) -> Iterator[list[Row]]:
    """Rows gathered by the cases; written out once, whatever the cases' outcomes."""
    rows: list[Row] = []
    yield rows
    variant = pytestconfig.getoption("--detection-variant")
    (report_dir / "matrix.json").write_text(json.dumps(
        {"variant": variant, "ok": all(r.ok for r in rows), "rows": [r.as_dict() for r in rows]},
        indent=2) + "\n")
    (report_dir / "matrix.md").write_text(matrix_markdown(rows, cases(variant)))
