"""The detection matrix judged on hand-made results records."""

from __future__ import annotations

from dataclasses import replace

from detection.cases import (
    BROKEN,
    CAUGHT,
    CLEAN,
    COLLATERAL,
    MISSED,
    WRONG_CAUSE,
    Case,
    cases,
    judge,
    matrix_markdown,
)
from fixtures.spec.record import Record
from vllm_lifecycle.faults.registry import FAULTS

CASE = Case("f", "f", ("flags/partial-wake", "flags/awake-baseline"), ("flags/partial-wake",),
            symptoms={"flags/partial-wake": "^m$"})


def rec(bid, outcome, n=0):
    return Record.from_dict({"nodeid": f"conformance/x.py::test[{bid}-{n}]", "behaviour": bid,
                             "variant": None, "transport": "http", "outcome": outcome, "message": "m"})


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
    armed = {name for c in cases() for name in (c.fault or "").split(",")}
    assert armed >= {f for f, v in FAULTS.items() if v.kind == "fault"}
    assert "preview-layered" in names
    # Stock vLLM under the layered profile: one case per topology, each must fail every test.
    stock = [c for c in cases() if c.name.startswith("stock-under-layered")]
    assert sorted(c.topologies for c in stock) == [("dp2",), ("single",)]
    for case in stock:
        assert case.fault is None and case.profile == "layered" and case.expect_fail
    assert {b for c in stock for b in c.expect_fail} == {
        "custody/refuse-unpaused-sleep", "custody/late-arrival",
        "topology/layered-sleep-every-rank", "topology/reference-model"}
    for case in cases("MRV1-eager"):
        args = case.pytest_args()
        assert args[0] == "--lifecycle-behaviours" and "MRV1-eager" in args[args.index("-k") + 1]
        assert set(case.expect_fail) <= set(case.behaviours)
        assert args[args.index("--lifecycle-transports") + 1] == case.transport
    # The partial wake is caught on one engine and, with no start of its own, on dp2.
    gating = {c.name: c.topologies for c in cases() if "partial-wake-resumes" in str(c.fault).split(",")
              and "gating/partial-wake-holds-requests" in c.expect_fail}
    assert gating == {"partial-wake-and-drain": ("single",), "offline-partial-wake-and-drain": ("single",),
                      "dp-keep-sync-and-partial-wake": ("dp2",)}
    offline = {f for c in cases() if c.transport == "offline" for f in str(c.fault).split(",")}
    assert offline == {"partial-wake-resumes", "wait-skips-drain", "buffered-delta-dropped",
                       "late-arrival-dropped", "dp-coordinator-latch", "weights-version-label-frozen",
                       "weights-finish-resumes", "refused-release-aborts"}


def test_matrix_markdown_lists_every_cell_and_the_problems():
    rows = [judge(CASE, [rec("flags/partial-wake", "pass"), rec("flags/awake-baseline", "pass")])]
    text = matrix_markdown(rows, [CASE])
    assert "| f | f | auto | flags/partial-wake | missed |" in text and "Problems:" in text


def test_a_caught_failure_without_the_required_evidence_is_an_error():
    case = Case("e", "f", ("exploration/reference-model",), ("exploration/reference-model",),
                evidence="# reproduction", symptoms={"exploration/reference-model": "Discrepancy"})
    bare = Record.from_dict({"nodeid": "x::t", "behaviour": "exploration/reference-model", "variant": None,
                             "transport": "http", "outcome": "fail",
                             "message": "DiscrepancyError: expected ..."})
    assert judge(case, [bare]).cells["exploration/reference-model"] == BROKEN
    shown = replace(bare, message="DiscrepancyError ...\n# reproduction (run against ...)\ncurl -s ...")
    assert judge(case, [shown]).cells["exploration/reference-model"] == CAUGHT


def test_a_failure_without_the_fault_symptom_is_not_a_catch():
    """The old judge counted any failure as caught: a hung request, a crash assertion."""
    hung = replace(rec("flags/partial-wake", "fail"), message="request did not end within 120 s")
    row = judge(CASE, [rec("flags/partial-wake", "fail"), hung, rec("flags/awake-baseline", "pass")])
    assert row.cells["flags/partial-wake"] == WRONG_CAUSE and not row.ok
    assert "1 of 2 failures lack the symptom" in row.details["flags/partial-wake"]


def test_a_case_without_a_symptom_cannot_catch():
    bare = Case("f", "f", ("flags/partial-wake",), ("flags/partial-wake",))
    assert judge(bare, [rec("flags/partial-wake", "fail")]).cells["flags/partial-wake"] == BROKEN


def test_every_case_names_a_compiling_symptom_for_each_behaviour_it_must_break():
    import re

    for case in cases():
        assert set(case.symptoms) == set(case.expect_fail), case.name
        for pattern in case.symptoms.values():
            re.compile(pattern)


def test_registry_symptoms_tell_the_fault_from_other_failures():
    """Each symptom matches a message the fault produces and not an unrelated failure."""
    import re

    from vllm_lifecycle.faults import registry as r

    samples = {
        r.PARTIAL_WAKE_RESUMED: "after waking only weights: expected is_sleeping=True is_paused=True "
                                "gauge=(0.0, 1.0, 0.0); observed is_sleeping=True is_paused=False "
                                "gauge=(0.0, 1.0, 0.0)",
        r.ABORTED_INSTEAD_OF_FINISHED: "/pause?mode=keep: finish reasons ['abort'], expected all 'length'",
        r.SLEEPING_FLAG_FALSE: "after /sleep?level=1: expected is_sleeping=True is_paused=True "
                               "gauge=(0.0, 1.0, 0.0); observed is_sleeping=False is_paused=True "
                               "gauge=(0.0, 1.0, 0.0)",
        r.SECOND_SLEEP_500: "expected 200 {'status': 'sleeping', 'level': 1}; observed POST "
                            "/sleep?level=1 -> 500 {'error': 'x'} (0.00 s)",
    }
    unrelated = "request did not end within 120 s of the abort"
    for pattern, message in samples.items():
        assert re.search(pattern, message, re.DOTALL), pattern
        assert not re.search(pattern, unrelated, re.DOTALL), pattern


def test_ran_while_held_matches_every_way_the_hold_judge_reports_a_run():
    """The symptom is read off the hold judge's own messages, so a reworded message cannot turn
    a caught fault into a wrong-cause one (as 'running' once did)."""
    import re

    from fixtures.judging.assertions import HoldSample, hold_problems
    from vllm_lifecycle.faults import registry as r

    ran = [HoldSample(0.0, False, 0, 1.0), HoldSample(0.4, False, 3, 1.0), HoldSample(0.8, True, 3, 0.0)]
    problems = hold_problems(ran, 3.0)
    assert len(problems) == 3
    for problem in problems:
        assert re.search(r.RAN_WHILE_HELD, f"only 'weights' awake: {problem}", re.DOTALL), problem
    assert not re.search(r.RAN_WHILE_HELD, "request did not end within 120 s of the abort")


def test_the_dp_partial_wake_symptom_adds_only_the_full_wake_left_unanswered():
    """On dp2 the fault may wedge the ranks instead of running the held requests: the full wake
    left unanswered is its symptom there, and a request left unfinished after an answered full
    wake still is not."""
    import re

    from vllm_lifecycle.faults import registry as r

    wedged = ("AssertionError: the full wake ('kv_cache' after 'weights'): POST /wake_up got no "
              "answer within 120 s")
    assert re.search(r.RAN_OR_WEDGED_ON_DP, wedged, re.DOTALL)
    assert not re.search(r.RAN_WHILE_HELD, wedged, re.DOTALL)
    unfinished = ("engine 1: no end to the request within 120 s of the full wake ('kv_cache' after "
                  "'weights'); observed finish_reasons={} completion_tokens=None chunks=0 took=120.00s "
                  "error=None")
    assert not re.search(r.RAN_OR_WEDGED_ON_DP, unfinished, re.DOTALL)


def test_every_slice_leaves_out_the_gpu_only_instances():
    # vLLM's own trainer skips on the CPU engine; a skip in a slice would make the case broken.
    from detection.cases import GPU_ONLY, cases

    for case in cases():
        args = case.pytest_args()
        keyword = args[args.index("-k") + 1]
        assert keyword.endswith(f"not {GPU_ONLY}"), (case.name, keyword)
        if case.keyword:
            assert keyword.startswith(f"({case.keyword}) and "), (case.name, keyword)


def test_merged_cases_keep_each_members_slice_narrowing_and_symptoms():
    from detection.cases import _together

    keep = Case("keep-aborts", "keep-aborts", ("custody/pause-in-flight",), ("custody/pause-in-flight",),
                keyword="V and (keep)", topologies=("dp2",), symptoms={"custody/pause-in-flight": "a"})
    sync = Case("weights-sync-first-engine-only", "weights-sync-first-engine-only",
                ("weights/sync-reaches-every-rank",), ("weights/sync-reaches-every-rank",),
                keyword="V and (sync_reaches)", symptoms={"weights/sync-reaches-every-rank": "b"})
    merged = _together("m", [keep, sync], "V")
    assert merged.fault == "keep-aborts,weights-sync-first-engine-only"
    assert merged.keyword == "V and (((keep)) or ((sync_reaches)))"
    assert merged.topologies == ("dp2",)  # the member without its own runs on the other's
    assert merged.symptoms == {"custody/pause-in-flight": "a", "weights/sync-reaches-every-rank": "b"}
    # A member that narrows nothing leaves the whole slice to run.
    assert _together("m", [keep, Case("x", "double-sleep-500", ("misuse/sleep-while-asleep",),
                                      ("misuse/sleep-while-asleep",), keyword="V")], "V").keyword == "V"


def test_cases_that_break_one_behaviour_or_patch_one_function_are_never_merged():
    import pytest

    from detection.cases import _together

    one = Case("a", "weights-sync-first-engine-only", ("weights/sync-reaches-every-rank",),
               ("weights/sync-reaches-every-rank",), keyword="V")
    other = Case("b", "weights-dp-reads-entry-0", ("weights/sync-reaches-every-rank",),
                 ("weights/sync-reaches-every-rank",), keyword="V")
    with pytest.raises(ValueError, match="distinct behaviours"):
        _together("m", [one, other], "V")
    drops = Case("c", "weights-sync-drops-a-tensor", ("weights/sync-lands",), ("weights/sync-lands",),
                 keyword="V")
    with pytest.raises(ValueError, match="both patch"):
        _together("m", [one, drops], "V")
    offline = Case("d", "double-sleep-500", ("misuse/sleep-while-asleep",),
                   ("misuse/sleep-while-asleep",), keyword="V", transport="offline")
    with pytest.raises(ValueError, match="one transport"):
        _together("m", [one, offline], "V")


def test_every_fault_is_armed_in_one_http_case_at_most():
    from collections import Counter

    real = cases()
    http = Counter(f for c in real if c.transport == "http" and c.fault for f in c.fault.split(","))
    # Two faults are armed twice: in their own case and in an exploration case that finds them;
    # and entry 0 on dp2 (its engines) and on tp2 (one engine's workers).
    assert {f for f, n in http.items() if n > 1} <= {"partial-wake-resumes", "noop-resume-aborts",
                                                     "weights-dp-reads-entry-0"}
    assert len({c.name for c in real}) == len(real)
