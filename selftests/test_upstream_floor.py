"""vLLM's own lifecycle tests are the suite's floor: conformance/upstream_floor.yaml maps every
upstream test's assertions to behaviours, each named behaviour must exist and its catalog
`source` must name that upstream test, and docs/design/upstream-floor.md must hold the table
rendered from the mapping. `python -m selftests.test_upstream_floor` rewrites that table."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from fixtures.spec.catalog import Catalog, load_catalog, parse_catalog

ROOT = Path(__file__).resolve().parent.parent
FLOOR = ROOT / "conformance" / "upstream_floor.yaml"
DOC = ROOT / "docs" / "design" / "upstream-floor.md"
BEGIN = "<!-- floor table: rendered from conformance/upstream_floor.yaml -->"
END = "<!-- end of floor table -->"


def load_floor(text: str) -> dict[str, Any]:
    """The mapping, its shape checked: a clear error names the entry that is wrong."""
    floor = yaml.safe_load(text)
    if not isinstance(floor, dict) or not isinstance(floor.get("tests"), list) or not floor.get("root"):
        raise ValueError("upstream floor: expected a mapping with `root` and a `tests` list")
    seen: set[str] = set()
    for test in floor["tests"]:
        tid = test.get("id") if isinstance(test, dict) else None
        if not isinstance(tid, str) or "::" not in tid:
            raise ValueError(f"upstream floor: a test without a `file::name` id: {test!r}")
        if tid in seen:
            raise ValueError(f"upstream floor: {tid} is listed twice")
        seen.add(tid)
        asserts = test.get("asserts")
        if not isinstance(asserts, list) or not asserts:
            raise ValueError(f"upstream floor: {tid} lists no assertions")
        for item in asserts:
            if not isinstance(item, dict) or not item.get("checks"):
                raise ValueError(f"upstream floor: {tid} has an assertion without `checks`: {item!r}")
            by, gap = item.get("by"), item.get("gap")
            if bool(by) == bool(gap) or (by is not None and not isinstance(by, list)):
                raise ValueError(f"upstream floor: {tid} / {item['checks']!r} needs either a `by` list "
                                 f"of behaviours or a `gap`, not both or neither")
    return floor


def full_id(floor: dict[str, Any], test_id: str) -> str:
    return f"{floor['root'].rstrip('/')}/{test_id}"


def names_test(source: str, upstream_id: str) -> bool:
    """Whether a catalog source names an upstream test: its id (with or without the class), or
    its file's path as a whole (not followed by `::`, which would name another test)."""
    text = re.sub(r"\s+::", "::", " ".join(source.split()))
    path, *parts = upstream_id.split("::")
    for name in {upstream_id, f"{path}::{parts[-1]}"}:
        if re.search(re.escape(name) + r"(?![\w:])", text):
            return True
    return re.search(re.escape(path) + r"(?![\w.:/])", text) is not None


def behaviours_of(test: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(b for item in test["asserts"] for b in item.get("by") or ()))


def floor_problems(floor: dict[str, Any], catalog: Catalog) -> list[str]:
    problems = []
    for test in floor["tests"]:
        upstream = full_id(floor, test["id"])
        for behaviour in behaviours_of(test):
            if behaviour not in catalog:
                problems.append(f"{upstream}: maps to {behaviour}, which the catalog does not have")
            elif not names_test(catalog[behaviour].source, upstream):
                problems.append(f"{upstream}: {behaviour}'s source does not name it")
    return problems


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def render(floor: dict[str, Any]) -> str:
    rows = ["| upstream test | needs | asserts | checked by |", "|---|---|---|---|"]
    for test in floor["tests"]:
        for n, item in enumerate(test["asserts"]):
            head = (f"`{test['id']}`", _cell(test.get("needs", ""))) if n == 0 else ("", "")
            if item.get("by"):
                by = ", ".join(f"`{b}`" for b in item["by"])
                by += f" ({_cell(item['note'])})" if item.get("note") else ""
            else:
                by = f"gap: {_cell(item['gap'])}"
            rows.append(f"| {head[0]} | {head[1]} | {_cell(item['checks'])} | {by} |")
    return "\n".join([BEGIN, *rows, END])


def rendered_in(doc: str, floor: dict[str, Any]) -> bool:
    return render(floor) in doc


def test_every_mapped_behaviour_exists_and_names_its_upstream_test() -> None:
    problems = floor_problems(load_floor(FLOOR.read_text()), load_catalog())
    assert not problems, "\n".join(problems)


def test_the_doc_holds_the_rendered_table() -> None:
    assert rendered_in(DOC.read_text(), load_floor(FLOOR.read_text())), (
        f"{DOC.relative_to(ROOT)} is out of step with {FLOOR.relative_to(ROOT)}: "
        "run `python -m selftests.test_upstream_floor` to rewrite its table")


CATALOG = """
behaviours:
  - id: area/checked
    must: The engine MUST do it.
    layer: contract
    source: >-
      spec; upstream tests/rl/test_a.py::TestX::test_one and
      tests/rl/test_b.py
    status: required
"""


def _floor(test_id: str, by: list[str]) -> dict[str, Any]:
    return load_floor(yaml.safe_dump({"root": "tests/rl", "tests": [
        {"id": test_id, "asserts": [{"checks": "it", "by": by}]}]}))


@pytest.mark.parametrize("test_id", ["test_a.py::TestX::test_one", "test_b.py::test_any"])
def test_a_named_test_or_file_passes(test_id: str) -> None:
    assert floor_problems(_floor(test_id, ["area/checked"]), parse_catalog(CATALOG)) == []


@pytest.mark.parametrize(("test_id", "by", "wanted"), [
    ("test_a.py::TestX::test_one", ["area/missing"], "does not have"),
    ("test_a.py::TestX::test_two", ["area/checked"], "source does not name it"),
    # A longer name that merely starts with a named one is another test.
    ("test_a.py::TestX::test_one_more", ["area/checked"], "source does not name it"),
    ("test_c.py::test_one", ["area/checked"], "source does not name it"),
])
def test_a_missing_behaviour_or_unnamed_test_is_a_problem(test_id: str, by: list[str], wanted: str) -> None:
    problems = floor_problems(_floor(test_id, by), parse_catalog(CATALOG))
    assert len(problems) == 1 and wanted in problems[0], problems


@pytest.mark.parametrize("entry", [
    {"id": "test_a.py", "asserts": [{"checks": "it", "by": ["area/checked"]}]},
    {"id": "test_a.py::test_one", "asserts": []},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it"}]},
    {"id": "test_a.py::test_one", "asserts": [{"checks": "it", "by": ["x/y"], "gap": "why"}]},
])
def test_a_malformed_mapping_is_refused(entry: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="upstream floor"):
        load_floor(yaml.safe_dump({"root": "tests/rl", "tests": [entry]}))


def test_a_stale_doc_is_caught() -> None:
    floor = _floor("test_a.py::TestX::test_one", ["area/checked"])
    doc = render(floor)
    floor["tests"][0]["asserts"][0]["checks"] = "something else"
    assert not rendered_in(doc, floor)


def _rewrite_doc() -> None:
    doc = DOC.read_text()
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    DOC.write_text(doc[:start] + render(load_floor(FLOOR.read_text())) + doc[end:])


if __name__ == "__main__":
    _rewrite_doc()
