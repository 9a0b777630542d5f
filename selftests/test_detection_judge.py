"""The detection matrix judged on hand-made results records."""

from __future__ import annotations

from faults.detection import (
    BROKEN,
    CAUGHT,
    CLEAN,
    COLLATERAL,
    MISSED,
    Case,
    cases,
    judge,
    matrix_markdown,
)
from faults.registry import FAULTS

CASE = Case("f", "f", ("flags/partial-wake", "flags/awake-baseline"), ("flags/partial-wake",))


def rec(bid, outcome, n=0):
    return {"nodeid": f"conformance/x.py::test[{bid}-{n}]", "behaviour": bid, "outcome": outcome,
            "message": "m"}


def test_caught_and_clean_make_a_good_row():
    row = judge(CASE, [rec("flags/partial-wake", "fail"), rec("flags/partial-wake", "pass", 1),
                       rec("flags/awake-baseline", "pass")])
    assert row.cells == {"flags/partial-wake": CAUGHT, "flags/awake-baseline": CLEAN} and row.ok


def test_a_fault_nothing_failed_on_is_missed():
    row = judge(CASE, [rec("flags/partial-wake", "pass"), rec("flags/awake-baseline", "pass")])
    assert row.cells["flags/partial-wake"] == MISSED and not row.ok
    assert "flags/partial-wake: missed" in row.problems()[0]


def test_a_guard_that_failed_is_collateral():
    row = judge(CASE, [rec("flags/partial-wake", "fail"), rec("flags/awake-baseline", "fail")])
    assert row.cells["flags/awake-baseline"] == COLLATERAL and not row.ok


def test_an_error_or_skip_is_never_counted_as_caught():
    for outcome in ("error", "skip", "notrun", "tentative-fail", "finding"):
        row = judge(CASE, [rec("flags/partial-wake", outcome), rec("flags/awake-baseline", "pass")])
        assert row.cells["flags/partial-wake"] == BROKEN and not row.ok, outcome
    row = judge(CASE, [rec("flags/partial-wake", "fail"), rec("flags/partial-wake", "error", 1),
                       rec("flags/awake-baseline", "pass")])
    assert row.cells["flags/partial-wake"] == BROKEN


def test_a_behaviour_that_did_not_run_is_an_error():
    row = judge(CASE, [rec("flags/awake-baseline", "pass")])
    assert row.cells["flags/partial-wake"] == BROKEN
    assert "no instance ran" in row.details["flags/partial-wake"]


def test_cases_cover_every_fault_the_preview_and_stock_under_layered():
    names = [c.name for c in cases()]
    assert set(names) >= {f for f, v in FAULTS.items() if v.kind == "fault"}
    assert "preview-layered" in names and "stock-under-layered" in names
    stock = next(c for c in cases() if c.name == "stock-under-layered")
    assert stock.fault is None and stock.profile == "layered" and stock.expect_fail
    for case in cases("MRV1-eager"):
        args = case.pytest_args()
        assert args[0] == "--lifecycle-behaviours" and "MRV1-eager" in args[args.index("-k") + 1]
        assert set(case.expect_fail) <= set(case.behaviours)
        assert args[args.index("--lifecycle-transports") + 1] == case.transport
    offline = [c for c in cases() if c.transport == "offline"]
    assert {c.fault for c in offline} == {"partial-wake-resumes", "wait-skips-drain",
                                          "buffered-delta-dropped"}


def test_matrix_markdown_lists_every_cell_and_the_problems():
    rows = [judge(CASE, [rec("flags/partial-wake", "pass"), rec("flags/awake-baseline", "pass")])]
    text = matrix_markdown(rows, [CASE])
    assert "| f | f | auto | flags/partial-wake | missed |" in text and "Problems:" in text


def test_a_caught_failure_without_the_required_evidence_is_an_error():
    case = Case("e", "f", ("exploration/reference-model",), ("exploration/reference-model",),
                evidence="# reproduction")
    bare = {"nodeid": "x::t", "behaviour": "exploration/reference-model", "outcome": "fail",
            "message": "DiscrepancyError: expected ..."}
    assert judge(case, [bare]).cells["exploration/reference-model"] == BROKEN
    shown = bare | {"message": "DiscrepancyError ...\n# reproduction (run against ...)\ncurl -s ..."}
    assert judge(case, [shown]).cells["exploration/reference-model"] == CAUGHT
