"""vLLM's own lifecycle tests are the suite's floor (fixtures/spec/upstream_floor.py): the mapping
lists exactly upstream's test functions of its release (the vendored snapshot), names for every
covered assertion the conformance test that checks it, each mapped behaviour exists and names
the upstream test, and docs/design/upstream-floor.md holds the table rendered from the mapping."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from fixtures.spec import upstream_floor as uf
from fixtures.spec.catalog import parse_catalog
from fixtures.spec.upstream_snapshot import Snapshot


def test_the_checked_in_floor_is_in_step_with_upstream_the_catalog_and_the_tests() -> None:
    problems = uf.current_problems()
    assert not problems, "\n".join(problems)


def test_the_doc_holds_the_rendered_table() -> None:
    assert uf.rendered_in(uf.DOC_PATH.read_text(), uf.load()), (
        f"{uf.DOC_PATH.relative_to(uf.ROOT)} is out of step with {uf.FLOOR_PATH.relative_to(uf.ROOT)}: "
        "run `python -m fixtures.spec.upstream_floor render` to rewrite its table")


def test_a_floor_missing_an_upstream_test_or_listing_another_is_caught() -> None:
    floor = uf.load()
    snapshot = Snapshot(str(floor["release"]), (), floor["root"], tuple(t["id"] for t in floor["tests"]))
    assert uf.snapshot_problems(floor, snapshot) == []
    dropped = copy.deepcopy(floor)
    gone = dropped["tests"].pop(0)["id"]
    dropped["tests"].append({**dropped["tests"][0], "id": "state_transitions/test_sleep.py::test_renamed"})
    assert uf.snapshot_problems(dropped, snapshot) == [
        f"{floor['root']}/{gone}: an upstream test function the floor does not list",
        f"{floor['root']}/state_transitions/test_sleep.py::test_renamed: listed, but vLLM "
        f"{floor['release']} has no such test function"]
    other = Snapshot("0.33.0", (), floor["root"], snapshot.tests)
    assert uf.snapshot_problems(floor, other)[0].startswith(f"the floor is of vLLM {floor['release']}")


CATALOG = """
behaviours:
  - id: area/checked
    must: The engine MUST do it.
    layer: contract
    source: >-
      spec; upstream tests/rl/test_a.py::TestX::test_one and
      tests/rl/test_b.py
    status: required
  - id: area/other
    must: The engine MUST do that.
    layer: contract
    source: tests/rl/test_a.py
    status: required
"""
MARKERS = {"conformance/area/test_checked.py::test_checked": frozenset({"area/checked"}),
           "conformance/area/test_other.py::test_other": frozenset({"area/other"})}
AT = [{"conformance/area/test_checked.py::test_checked": "it is checked"}]


def _floor(test_id: str, by: list[str], at: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return uf.load_floor(yaml.safe_dump({"root": "tests/rl", "release": "0.32.0", "tests": [
        {"id": test_id, "asserts": [{"checks": "it", "by": by, "at": AT if at is None else at}]}]}))


@pytest.mark.parametrize("test_id", ["test_a.py::TestX::test_one", "test_b.py::test_any"])
def test_a_named_test_or_file_passes(test_id: str) -> None:
    floor = _floor(test_id, ["area/checked"])
    assert uf.catalog_problems(floor, parse_catalog(CATALOG)) == []
    assert uf.at_problems(floor, MARKERS) == []


@pytest.mark.parametrize(("test_id", "by", "wanted"), [
    ("test_a.py::TestX::test_one", ["area/missing"], "does not have"),
    ("test_a.py::TestX::test_two", ["area/checked"], "source does not name it"),
    # A longer name that merely starts with a named one is another test.
    ("test_a.py::TestX::test_one_more", ["area/checked"], "source does not name it"),
    ("test_c.py::test_one", ["area/checked"], "source does not name it"),
])
def test_a_missing_behaviour_or_unnamed_test_is_a_problem(test_id: str, by: list[str], wanted: str) -> None:
    problems = uf.catalog_problems(_floor(test_id, by), parse_catalog(CATALOG))
    assert len(problems) == 1 and wanted in problems[0], problems


@pytest.mark.parametrize(("by", "at", "wanted"), [
    (["area/checked"], [{"conformance/area/test_gone.py::test_gone": "it"}],
     "names conformance/area/test_gone.py::test_gone, which is no conformance test function"),
    (["area/checked"], [{"conformance/area/test_other.py::test_other": "it"}],
     "conformance/area/test_other.py::test_other checks ['area/other'], none of ['area/checked']"),
    (["area/checked", "area/other"], AT, "names ['area/other'] but no test of them under `at`"),
])
def test_an_assertion_whose_tests_do_not_check_it_is_a_problem(by: list[str], at: list[dict[str, str]],
                                                              wanted: str) -> None:
    problems = uf.at_problems(_floor("test_a.py::TestX::test_one", by, at), MARKERS)
    assert len(problems) == 1 and problems[0].endswith(wanted), problems


@pytest.mark.parametrize("entry", [
    {"id": "test_a.py", "asserts": [{"checks": "it", "by": ["area/checked"], "at": AT}]},
    {"id": "test_a.py::test_one", "asserts": []},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it"}]},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "by": ["x/y"], "gap": "why"}]},
    # claimed covered without naming the test that covers it, or naming it badly
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "by": ["area/checked"]}]},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "by": ["area/checked"],
                                               "at": ["conformance/area/test_checked.py::test_checked"]}]},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "by": ["area/checked"],
                                               "at": [{"conformance/area/test_checked.py": "it"}]}]},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "gap": "why", "at": AT}]},
])
def test_a_malformed_mapping_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(uf.FloorError, match="upstream floor"):
        uf.load_floor(yaml.safe_dump({"root": "tests/rl", "tests": [entry]}))


def test_a_floor_that_is_not_yaml_is_one_line() -> None:
    with pytest.raises(uf.FloorError, match=r"^upstream floor: not YAML \(") as caught:
        uf.load_floor("tests: [\n  - id: a: b")
    assert "\n" not in str(caught.value)


def test_the_markers_are_read_as_pytest_sees_them() -> None:
    markers = uf.conformance_markers()
    assert markers["conformance/flags/test_sleep_flags.py::test_awake_baseline"] == {"flags/awake-baseline"}
    # a marker naming its behaviour through a module constant
    assert markers["conformance/topology/test_quiescent_after_pause.py::test_quiescent_after_pause"]


def test_a_stale_doc_is_caught() -> None:
    floor = _floor("test_a.py::TestX::test_one", ["area/checked"])
    doc = uf.render(floor)
    assert "`area/test_checked.py::test_checked` it is checked" in doc
    floor["tests"][0]["asserts"][0]["checks"] = "something else"
    assert not uf.rendered_in(doc, floor)
