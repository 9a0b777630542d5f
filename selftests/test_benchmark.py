"""The suite's own benchmark, on hand-made results documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.reporting.benchmark import busy_fraction, cpu_times, main, markdown, summarize

RESULTS = {
    "servers": {"wall_seconds": 300.0,
                "starts_per_config": {"MRV1-eager": [1, 50.0], "MRV1-eager/dp2": [2, 100.0]}},
    "machine": {"cores": 2, "cpu_busy": 0.69},
    "results": [
        {"server": "MRV1-eager", "duration": 80.0},  # its first test paid the 50 s start
        {"server": "MRV1-eager", "duration": 20.0},
        {"server": "MRV1-eager/dp2", "duration": 130.0},
        {"server": None, "duration": 0.5},
    ],
}


def test_each_config_gets_its_starts_and_its_tests_without_the_start():
    bench = summarize(RESULTS)
    rows = {r.config: r for r in bench.rows}
    assert rows["MRV1-eager"].start_seconds == 50.0 and rows["MRV1-eager"].test_seconds == 50.0
    assert rows["MRV1-eager/dp2"].starts == 2 and rows["MRV1-eager/dp2"].test_seconds == 30.0
    assert rows["(no server)"].total == 0.5
    assert bench.serial_seconds == 230.5 and bench.critical_path.config == "MRV1-eager/dp2"
    assert bench.wall_over_critical == 2.31 and bench.cpu_busy == 0.69


def test_cpu_figures_from_proc_stat():
    before = cpu_times("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4")
    after = cpu_times("cpu  200 0 200 800 100 0 0 0 0 0\n")
    assert before == (200, 1000) and busy_fraction(before, after) == round(200 / 300, 3)
    assert busy_fraction(None, after) is None
    with pytest.raises(ValueError, match="not a /proc/stat aggregate line"):
        cpu_times("intr 1 2 3")


def test_markdown_compares_with_the_previous_run():
    text = markdown(summarize(RESULTS), {"rows": [{"config": "MRV1-eager", "total": 120.0}],
                                         "wall_seconds": 400.0, "critical_path_seconds": 200.0,
                                         "cpu_busy": 0.5})
    assert "| MRV1-eager | 1 | 50 s | 50 s | 100 s | 120 s |" in text
    assert "| MRV1-eager/dp2 | 2 | 100 s | 30 s | 130 s | new |" in text
    assert "wall / critical path: 2.31" in text and "CPU busy over the run (all cores): 69%" in text


def test_the_command_writes_beside_the_report_and_names_a_bad_folder(tmp_path: Path, capsys):
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(RESULTS))
    assert main([str(run)]) == 0
    assert json.loads((run / "benchmark.json").read_text())["critical_path"] == "MRV1-eager/dp2"
    later = tmp_path / "run-2"
    later.mkdir()
    (later / "results.json").write_text(json.dumps(RESULTS))
    assert main([str(later)]) == 0 and "previous run: wall 300 s" in capsys.readouterr().out
    assert main([str(tmp_path / "missing")]) == 2
    assert "does not exist: name a run's report folder" in capsys.readouterr().err
