"""docs/layout.md lists every module of the harness and the installed package, and nothing else:
the page a newcomer reads to find where a thing lives cannot fall behind the tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "layout.md"
ROOMS = ("fixtures", "vllm_lifecycle", "detection", "sweep", "thresholds")
# A row of a module table: its first cell is the module's path, in backticks.
ROW = re.compile(r"^\|\s*`([\w/.-]+\.py)`\s*\|", re.MULTILINE)
# Any path the page names in backticks (a row, or prose such as `fixtures/plugin/servers.py`).
NAMED = re.compile(r"`((?:[\w.-]+/)+[\w.-]+\.py)(?::\w+)?`")


def docstring_only(path: Path) -> bool:
    """A package's __init__.py with nothing but a docstring (and future imports): the room's
    heading, not a module to list."""
    body = ast.parse(path.read_text(), filename=str(path)).body
    return all((isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
               or (isinstance(n, ast.ImportFrom) and n.module == "__future__") for n in body)


def tree_modules(root: Path = ROOT) -> set[str]:
    return {p.relative_to(root).as_posix() for room in ROOMS for p in (root / room).rglob("*.py")
            if not (p.name == "__init__.py" and docstring_only(p))}


def layout_problems(doc_text: str, modules: set[str], exists: set[str] | None = None) -> list[str]:
    """What the page and the tree disagree on, each as the edit that mends it. `exists` holds
    the other paths the page may name (tests, conftests); by default the module set."""
    listed = set(ROW.findall(doc_text))
    named = {p for p in NAMED.findall(doc_text) if p.split("/")[0] in (*ROOMS, "conformance", "selftests")}
    known = modules | (exists or set())
    problems = []
    if missing := sorted(modules - listed):
        problems.append("docs/layout.md does not list these modules; add a row "
                        "(| `path` | what it holds |) to its room's table: " + ", ".join(missing))
    if gone := sorted((listed - modules) | (named - known - listed)):
        problems.append("docs/layout.md names modules that do not exist; remove or rename them: "
                        + ", ".join(gone))
    return problems


def test_the_layout_doc_lists_every_module_and_only_those():
    others = {p.relative_to(ROOT).as_posix() for d in ("conformance", "selftests")
              for p in (ROOT / d).rglob("*.py")}
    problems = layout_problems(DOC.read_text(), tree_modules(), others)
    assert not problems, "\n".join(problems)


def test_a_module_left_out_or_one_gone_is_named_with_its_mend():
    doc = ("| `fixtures/a.py` | kept |\n| `fixtures/gone.py` | removed since |\n"
           "Prose naming `fixtures/renamed.py:thing` and `conformance/x/test_y.py`.\n")
    problems = layout_problems(doc, {"fixtures/a.py", "fixtures/new.py"}, {"conformance/x/test_y.py"})
    assert problems == [
        "docs/layout.md does not list these modules; add a row (| `path` | what it holds |) to "
        "its room's table: fixtures/new.py",
        "docs/layout.md names modules that do not exist; remove or rename them: "
        "fixtures/gone.py, fixtures/renamed.py"]
    assert layout_problems("| `fixtures/a.py` | x |\n", {"fixtures/a.py"}) == []


def test_an_init_with_code_is_a_module_and_a_docstring_only_one_is_not(tmp_path: Path):
    room = tmp_path / "fixtures" / "room"
    room.mkdir(parents=True)
    (room.parent / "__init__.py").write_text('"""The harness."""\nfrom __future__ import annotations\n')
    (room / "__init__.py").write_text('"""A room."""\nLIMIT = 3\n')
    (room / "judge.py").write_text("")
    assert tree_modules(tmp_path) == {"fixtures/room/__init__.py", "fixtures/room/judge.py"}
