"""The detection self-test: run slices of the conformance suite against the real target with
one known fault armed each, and write the detection matrix (fault x behaviour)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from detection.cases import SMOKE, Row, cases, matrix_markdown, schedule
from detection.lanes import Lanes, run_case
from fixtures.launching.workers import available_cores
from fixtures.spec.catalog import load_catalog

ROOT = Path(__file__).resolve().parent.parent


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("detection", "fault detection self-test")
    group.addoption("--detection-report-dir", default=None,
                    help="folder for the matrix and each case's run (default: reports/detection-<UTC time>)")
    group.addoption("--detection-variant", default="MRV1-eager",
                    help="the variant the faults are injected into (default: MRV1-eager)")
    group.addoption("--detection-lanes", default=None,
                    help="cases run side by side, one CPU core each (the DP cases run alone "
                         "first); default: one per core this process may run on, 1 runs every "
                         "case alone")
    group.addoption("--detection-smoke", action="store_true",
                    help="only the cases .ci/run runs (detection/cases.py SMOKE): one per transport")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--detection-smoke"):
        return
    def smoke(item: pytest.Item) -> bool:
        case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
        return case is None or case.name in SMOKE

    kept = [i for i in items if smoke(i)]
    config.hook.pytest_deselected(items=[i for i in items if i not in kept])
    items[:] = kept


def _lane_count(config: pytest.Config, cores: list[int]) -> int:
    raw = config.getoption("--detection-lanes")
    if raw is None:
        return max(1, len(cores))
    try:
        lanes = int(raw)
    except ValueError:
        raise pytest.UsageError(f"--detection-lanes: {raw!r} is not a whole number") from None
    if not 1 <= lanes <= len(cores):
        raise pytest.UsageError(f"--detection-lanes: {lanes} is not between 1 and the {len(cores)} "
                                f"core(s) this process may run on (one per lane)")
    return lanes


@pytest.fixture(scope="session")
def report_dir(pytestconfig: pytest.Config) -> Path:
    chosen = pytestconfig.getoption("--detection-report-dir")
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = Path(chosen) if chosen else ROOT / "reports" / f"detection-{stamp}"
    path.mkdir(parents=True, exist_ok=True)
    return path.resolve()


@pytest.fixture(scope="session")
def lanes(request: pytest.FixtureRequest, report_dir: Path) -> Iterator[Lanes]:
    """Every selected case, started in the background at the first test; stopped at the end."""
    config = request.config
    cores = available_cores()
    selected = [item.callspec.params["case"] for item in request.session.items
                if hasattr(item, "callspec") and "case" in item.callspec.params]
    plan = schedule(selected, load_catalog(), _lane_count(config, cores))
    runner = Lanes(plan, cores, lambda case, slice_, keep: run_case(case, report_dir, slice_, keep))
    runner.start()
    try:
        yield runner
    finally:
        runner.stop()


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
