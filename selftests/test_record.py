"""The results record: one typed value per test instance, written only through the run's state,
and the document built from values that results.json's readers (the report, the benchmark, the
sweep, the detection cases) take."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from types import SimpleNamespace

import pytest

import thresholds
from detection import cases
from fixtures.launching.config import build_config
from fixtures.plugin import items
from fixtures.plugin.state import RunState
from fixtures.reporting import benchmark, report, results
from fixtures.second_chances import SecondChance
from fixtures.spec.catalog import load_catalog
from fixtures.spec.record import Instance, Record, RecordError
from selftests.test_import_rules import ROOT, tree_modules
from sweep import matrix
from thresholds import Measurement

OFFLINE_DP2 = Instance(variant="MRV1-eager", transport="offline", topology="dp2", engine="LLM-MP1",
                       round=2, params=("MRV1-eager", "LLM-MP1", "dp2", "round2"))
FAILED = Record("conformance/a.py::t[MRV1-eager-LLM-MP1-dp2-round2]", "flags/sleep-level", OFFLINE_DP2,
                layer="contract", level="required", outcome="fail", message="expected 200",
                duration=1.5, server="MRV1-eager/LLM-MP1/dp2", measurements=({"name": "m"},),
                notes=("restored",), second_chances=({"kind": "retried", "reason": "late"},),
                expectation="not the finding", triage="file it")


def test_a_record_serialises_to_the_entry_the_readers_take():
    assert FAILED.as_dict() == {
        "nodeid": "conformance/a.py::t[MRV1-eager-LLM-MP1-dp2-round2]", "behaviour": "flags/sleep-level",
        "variant": "MRV1-eager", "transport": "offline", "topology": "dp2", "engine": "LLM-MP1",
        "round": 2, "layer": "contract", "level": "required", "outcome": "fail",
        "message": "expected 200", "duration": 1.5, "server": "MRV1-eager/LLM-MP1/dp2",
        "measurements": [{"name": "m"}], "notes": ["restored"],
        "second_chances": [{"kind": "retried", "reason": "late"}], "expectation": "not the finding",
        "triage": "file it"}
    explored = dataclasses.replace(FAILED, properties={}, findings_reached=("a/b",), explored={"steps": 3})
    assert list(explored.as_dict())[-3:] == ["properties", "findings_reached", "explored"]
    assert explored.as_dict()["findings_reached"] == ["a/b"]


def test_a_stored_entry_reads_back_into_the_same_record():
    params = ("MRV1", "eager", "LLM", "MP1", "dp2", "round2")
    record = dataclasses.replace(FAILED, instance=dataclasses.replace(OFFLINE_DP2, params=params),
                                 properties={"rss": [1, 2]}, findings_reached=("a/b",), explored={"steps": 3})
    assert Record.from_dict(record.as_dict()) == record
    assert Record.from_dict(FAILED.as_dict()).as_dict() == FAILED.as_dict()
    # An entry of an older suite lacks what has a default today: the default.
    older = {"nodeid": "t::a", "behaviour": "flags/x", "variant": None, "transport": "http"}
    assert Record.from_dict(older) == Record("t::a", "flags/x", Instance(None, "http"))


def test_a_stored_entry_without_a_required_field_names_it():
    entry = FAILED.as_dict()
    del entry["transport"]
    with pytest.raises(RecordError, match=r"'conformance/a.py::t\[.*' lacks transport"):
        Record.from_dict(entry)


def test_a_document_from_values_reads_in_the_report_benchmark_sweep_and_detection():
    passed = Record("conformance/b.py::t[MRV1-eager]", "flags/awake-baseline",
                    Instance("MRV1-eager", "http"), outcome="pass", duration=3.0, server="MRV1-eager")
    facts = {"profile": "0.32", "variants": ["MRV1-eager", "MRV2-eager"],
             "variants_off_platform": {"MRV2-eager": "needs Triton"}, "topologies": ["single", "dp2"],
             "fault": None, "target": {"vllm_version": "0.32.0"}}
    servers = results.server_stats([("MRV1-eager", 1.0, True), ("MRV1-eager/LLM-MP1/dp2", 0.5, False)],
                                   {"MRV1-eager": 1, "MRV1-eager/LLM-MP1/dp2": 1}, 4.5, 9.94)
    doc = results.run_document(facts, servers, {"cores": 2}, [FAILED, passed])
    assert list(doc) == [*facts, "servers", "machine", "counts", "soak", "incomplete", "second_chances",
                         "second_chance_counts", "verdict", "results"]
    assert servers == {"starts": 2, "failed_starts": 1, "starts_per_config": {
        "MRV1-eager": [1, 1.0], "MRV1-eager/LLM-MP1/dp2": [1, 0.5]}, "start_seconds": 1.5,
        "instances_served": 2, "per_config": {"MRV1-eager": 1, "MRV1-eager/LLM-MP1/dp2": 1},
        "test_seconds": 3.0, "wall_seconds": 9.9}
    assert doc["counts"]["fail"] == 1 and doc["verdict"].startswith("CONFORMANCE FAIL -- 1 passed | 1 failed")
    assert doc["verdict"].endswith(" | 1 retried") and doc["second_chances"][0]["nodeid"] == FAILED.nodeid
    assert doc["soak"]["failures_per_round"] == {"1": 0, "2": 1}
    assert "| flags/sleep-level | offline LLM-MP1 | dp2 | fail |" in report.render_markdown(doc)
    rows = {r.config: r for r in benchmark.summarize(doc).rows}
    assert rows["MRV1-eager/LLM-MP1/dp2"].alone and rows["MRV1-eager"].test_seconds == 2.0
    assert matrix.cell_of([FAILED])["outcome"] == "fail"
    clean = cases.judge(cases.Case("c", None, ("flags/awake-baseline",), ()), [passed])
    assert clean.cells == {"flags/awake-baseline": cases.CLEAN}


def _state() -> RunState:
    return RunState(config=build_config({}.get, {}, Path("/tmp/r")), catalog=load_catalog())


def _report(when: str, result: str, text: str = "", duration: float = 1.0, properties=(), sections=()):
    return SimpleNamespace(nodeid="t::a", when=when, duration=duration, passed=result == "passed",
                           skipped=result == "skipped", failed=result == "failed",
                           user_properties=list(properties), sections=list(sections),
                           longrepr=SimpleNamespace(reprcrash=SimpleNamespace(message=text)),
                           longreprtext=text)


def test_phases_add_up_the_worst_outcome_stays_and_a_teardown_after_a_failure_is_a_note():
    state = _state()
    state.register("t::a", Record("t::a", "flags/x", Instance("MRV1-eager", "http"), layer="mechanism"))
    assert state.record_phase(_report("setup", "passed", duration=0.5, properties=[("behaviour", "flags/x")]))
    unserialisable = object()
    failed = state.record_phase(_report(
        "call", "failed", "expected 200; observed 500",
        properties=[("behaviour", "flags/x"), ("rss", [1, 2]), ("handle", unserialisable)],
        sections=[(results.EXPECTATION_SECTION, "not the finding")]))
    assert failed is not None and failed.outcome == "fail" and failed.message.startswith("expected 200")
    assert failed.triage == thresholds.policy()["mechanism"] and failed.expectation == "not the finding"
    assert failed.properties == {"rss": [1, 2]}
    state.record_phase(_report("teardown", "failed", "ReadTimeout: the engine did not answer\nmore"))
    after = state.records["t::a"]
    assert after.outcome == "fail" and after.message == failed.message and after.duration == 2.5
    assert after.notes == ("teardown after the failure: ReadTimeout: the engine did not answer",)
    elsewhere = _report("call", "passed")
    elsewhere.nodeid = "t::other"  # not a conformance test: no record
    assert state.record_phase(elsewhere) is None and list(state.records) == ["t::a"]


def test_a_test_writes_its_record_only_through_the_run_state():
    state = _state()
    state.register("t::a", Record("t::a", "flags/x", Instance("MRV1-eager", "http")))
    with pytest.raises(TypeError):
        state.records["t::a"] = FAILED  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.records["t::a"].outcome = "pass"  # type: ignore[misc]
    state.record_server("t::a", "MRV1-eager/api-key")
    state.add_notes("t::a", "first")
    state.add_notes("t::a")  # nothing to add
    state.add_notes("t::a", "second", "third")
    state.add_second_chances("t::a", SecondChance("voided", "ended before the pause"))
    state.add_second_chances("t::a")  # nothing to add
    state.add_measurements("t::a", [Measurement("flags/x", "m", 2.0, 1.0, "<=", "s", False)])
    state.record_exploration("t::a", ["a/b"], {"steps": 3})
    for write in (state.record_server, state.add_notes):
        write("t::missing", "lost")  # a test without a record (not a conformance test)
    record = state.records["t::a"]
    assert record.server == "MRV1-eager/api-key" and record.notes == ("first", "second", "third")
    assert record.second_chances == ({"kind": "voided", "reason": "ended before the pause"},)
    assert [m["name"] for m in record.measurements] == ["m"] and record.findings_reached == ("a/b",)
    assert list(state.records) == ["t::a"]
    # Nothing but the run state's own methods touches its records.
    writers = [str(path.relative_to(ROOT)) for path in tree_modules()
               if any(isinstance(n, ast.Attribute) and n.attr == "_records"
                      for n in ast.walk(ast.parse(path.read_text())))]
    assert writers == ["fixtures/plugin/state.py"]


def test_an_item_is_read_once_into_its_instance():
    variant, engine, topology = (SimpleNamespace(name=n) for n in ("MRV1-eager", "LLM-MP0", "dp2"))
    spec = SimpleNamespace(id="MRV1-eager-LLM-MP0-dp2-round2", params={
        "variant": variant, "offline_engine": engine, "topology": topology, "lifecycle_round": 2})
    item = SimpleNamespace(callspec=spec, fixturenames=("topology_offline",), stash={})
    found = items.instance(item)  # type: ignore[arg-type]
    assert found == Instance("MRV1-eager", "offline", "dp2", "LLM-MP0", 2,
                             ("MRV1", "eager", "LLM", "MP0", "dp2", "round2"))
    spec.params = {}
    assert items.instance(item) is found  # type: ignore[arg-type]
    plain = SimpleNamespace(callspec=None, fixturenames=("engine",), stash={})
    assert items.instance(plain) == Instance(None, "http")  # type: ignore[arg-type]
    # A protocol test's HTTP instance: the offline-engine parameter is None.
    spec = SimpleNamespace(id="MRV1-eager-http", params={"variant": variant, "offline_engine": None})
    over_http = SimpleNamespace(callspec=spec, fixturenames=("lifecycle", "offline_engine"), stash={})
    assert items.instance(over_http).transport == "http"  # type: ignore[arg-type]
