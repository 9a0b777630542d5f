"""Second chances (fixtures/second_chances.py): each one the harness takes is in the test's
record, in results.json with its nodeid and per kind, in the verdict line and in the report."""

from __future__ import annotations

import pytest

from fixtures.reporting import report
from fixtures.reporting import results as results_mod
from fixtures.second_chances import KINDS, SecondChance, phrase, tally
from fixtures.spec.record import Record


def test_a_second_chance_names_a_known_kind_and_a_reason():
    assert SecondChance("voided", "late").as_dict() == {"kind": "voided", "reason": "late"}
    with pytest.raises(ValueError, match="unknown kind 'again'"):
        SecondChance("again", "late")
    with pytest.raises(ValueError, match=r"\(retried\) with no reason"):
        SecondChance("retried", " ")


def test_the_phrase_names_only_the_kinds_taken_in_order():
    counts = tally([{"kind": "voided"}, {"kind": "retried"}, {"kind": "retried"}, {"kind": "retried"}])
    assert counts == {"retried": 3, "voided": 1} and list(counts) == list(KINDS)
    assert phrase(counts) == "3 retried, 1 voided"
    assert phrase(tally([])) == ""


def _record(nodeid: str, outcome: str = "pass", *kinds: str) -> dict:
    return {"nodeid": nodeid, "behaviour": "flags/x", "variant": "V", "transport": "http", "outcome": outcome,
            "duration": 1.0, "second_chances": [{"kind": k, "reason": f"{k} because late"} for k in kinds]}


def _document(records: list[dict]) -> dict:
    typed = [Record.from_dict(r) for r in records]
    return results_mod.run_document({"variants": ["V"], "fault": None}, {}, {}, typed)


def test_results_list_every_second_chance_with_its_test_and_the_verdict_counts_them():
    doc = _document([_record("t::a", "pass", "retried", "retried"), _record("t::b", "pass", "voided"),
                     _record("t::c")])
    assert doc["second_chances"] == [
        {"nodeid": "t::a", "kind": "retried", "reason": "retried because late"},
        {"nodeid": "t::a", "kind": "retried", "reason": "retried because late"},
        {"nodeid": "t::b", "kind": "voided", "reason": "voided because late"}]
    assert doc["second_chance_counts"] == {"retried": 2, "voided": 1}
    assert doc["verdict"].startswith("CONFORMANCE PASS -- 3 passed")
    assert doc["verdict"].endswith(" | 2 retried, 1 voided")


def test_a_run_without_second_chances_says_nothing_of_them():
    doc = _document([_record("t::a")])
    assert doc["second_chances"] == [] and "retried" not in doc["verdict"]
    assert "Second chances" not in report.render_markdown(doc)
    assert "Second chances" not in report.render_html(doc)


def test_workers_second_chances_are_merged_into_the_run():
    runs = {"gw0": _document([_record("t::a", "pass", "voided")]),
            "gw1": _document([_record("t::b", "pass", "retried")])}
    merged = results_mod.merge_runs(runs, {})
    assert [(c["nodeid"], c["kind"]) for c in merged["second_chances"]] == [("t::a", "voided"),
                                                                           ("t::b", "retried")]
    assert merged["verdict"].endswith(" | 1 retried, 1 voided")


def test_the_report_lists_each_second_chance_under_its_count():
    doc = _document([_record("t::a", "pass", "retried"), _record("t::b", "pass", "voided")])
    md = report.render_markdown(doc)
    assert "## Second chances (1 retried, 1 voided)" in md
    assert "- `t::b` voided: voided because late" in md
    html = report.render_html(doc)
    assert "<h2>Second chances (1 retried, 1 voided)</h2>" in html
    assert "<li><code>t::a</code> retried: retried because late</li>" in html
    # A document written before the list: read off the records.
    del doc["second_chances"]
    assert "- `t::a` retried: retried because late" in report.render_markdown(doc)
