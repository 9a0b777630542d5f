"""How phase reports become outcomes, and the verdict line that ends every run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures import plugin


def report(when="call", outcome="passed", wasxfail=None):
    rep = SimpleNamespace(when=when, passed=outcome == "passed", skipped=outcome == "skipped",
                          failed=outcome == "failed")
    if wasxfail is not None:
        rep.wasxfail = wasxfail
    return rep


@pytest.mark.parametrize(("rep", "expected"), [
    (report(), "pass"),
    (report(outcome="failed"), "fail"),
    (report(when="setup", outcome="failed"), "error"),  # includes reclassified harness errors
    (report(when="teardown", outcome="failed"), "error"),
    (report(when="setup", outcome="skipped"), "skip"),
    (report(outcome="skipped", wasxfail="tentative under profile 0.32"), "tentative-fail"),
    (report(outcome="passed", wasxfail="tentative under profile 0.32"), "tentative-pass"),
    (report(outcome="skipped", wasxfail=f"{plugin.FINDING_PREFIX} on x: y"), "finding"),
    (report(outcome="passed", wasxfail=f"{plugin.FINDING_PREFIX} on x: y"), "finding-fixed"),
])
def test_outcome_of_a_phase(rep, expected):
    assert plugin._outcome(rep) == expected


def test_error_outranks_fail_outranks_skip():
    order = sorted(plugin._SEVERITY, key=plugin._SEVERITY.get)
    assert order.index("error") > order.index("fail") > order.index("skip") > order.index("pass")


def test_verdict_passes_only_without_fail_error_or_unrun_tests():
    tally = dict.fromkeys(plugin._SEVERITY, 0) | {"pass": 3, "skip": 2, "tentative-fail": 1,
                                                   "finding": 1}
    assert plugin.verdict_line(tally).startswith("CONFORMANCE PASS -- 3 passed | 0 failed")
    for bad in ("fail", "error", "notrun"):
        assert plugin.verdict_line(tally | {bad: 1}).startswith("CONFORMANCE FAIL")


def test_which_arguments_cover_the_conformance_tree():
    root = plugin.ROOT
    assert plugin._covers_conformance(["conformance"], root) == (True, True)
    assert plugin._covers_conformance(["."], root) == (True, True)
    assert plugin._covers_conformance(["conformance/flags/test_sleep_flags.py::x"], root) == (True, False)
    assert plugin._covers_conformance(["selftests"], root) == (False, False)
    assert Path(plugin.CONFORMANCE_DIR).is_dir()
