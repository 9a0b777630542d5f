"""The one-way import rule of the tree (docs/layout.md), kept the way Kubernetes keeps
`.import-restrictions` beside its e2e framework: each room names the rooms it may import, and
every import of every module (a function's own imports included) is checked against it. It denies
by default: a module no room holds is a breach, whatever it imports."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = ("fixtures", "vllm_lifecycle", "thresholds", "sweep", "detection", "conformance", "selftests")

# Room (a folder, or one module) -> the suite rooms its modules may import besides their own.
# The most specific room that holds a module is its room; a module no room holds is refused.
BASE = ("fixtures.errors", "fixtures.second_chances", "fixtures.axes", "fixtures.spec")
RULES: dict[str, tuple[str, ...]] = {
    # Runs in the target's interpreter, beside vLLM: nothing of the suite.
    "fixtures.in_target": (),
    "fixtures.errors": (),
    "fixtures.second_chances": (),
    "fixtures.axes": ("fixtures.errors",),
    "fixtures.spec": ("fixtures.errors", "fixtures.axes", "thresholds"),
    "fixtures.reporting": (*BASE,),
    "fixtures.launching": (*BASE, "fixtures.in_target", "vllm_lifecycle", "thresholds"),
    "fixtures.observing": (*BASE, "fixtures.launching", "fixtures.in_target", "vllm_lifecycle"),
    # The lifecycle protocol: parts a test speaks, thin over the observing clients.
    "fixtures.protocol": (*BASE, "fixtures.observing"),
    "fixtures.judging": (*BASE, "fixtures.protocol", "fixtures.observing", "fixtures.launching",
                         "thresholds"),
    # Runs the reproducers against servers it starts: a command beside the pytest layer.
    "fixtures.reproducing": (*BASE, "fixtures.in_target", "fixtures.launching", "fixtures.reporting"),
    "fixtures.plugin": (*BASE, "fixtures.in_target", "fixtures.launching", "fixtures.observing",
                        "fixtures.protocol", "fixtures.judging", "fixtures.reporting", "vllm_lifecycle",
                        "thresholds"),
    # Loaded by vLLM's own processes: nothing outside the installed package.
    "vllm_lifecycle": (),
    "thresholds": (),
    "sweep": (*BASE, "fixtures.launching.server"),
    # Runs each fault's cases on servers it launches, judged against the catalog.
    "detection": ("fixtures.axes", "fixtures.spec", "fixtures.launching", "vllm_lifecycle.faults"),
    # A test may import the spec, the judges, the lifecycle protocol, the readings of a live
    # engine (until the protocol takes them over), the limits and the base's errors and second
    # chances.
    "conformance": ("fixtures.errors", "fixtures.second_chances", "fixtures.spec", "fixtures.protocol",
                    "fixtures.observing", "fixtures.judging", "thresholds",
                    # Reached past that today, until the protocol takes them over.
                    "fixtures.launching.environments", "fixtures.launching.external",
                    "fixtures.launching.recipes", "fixtures.launching.server",
                    "fixtures.plugin.checkpoints", "fixtures.plugin.state"),
    # The package itself (empty): every room in it has its own rule, so none falls back to this
    # (test_every_room_of_the_harness_has_a_rule).
    "fixtures": (),
    # Names the plugin's modules in pytest_plugins; imports none.
    "conftest": (),
    # The suite's own tests: every room.
    "selftests": ("fixtures", "vllm_lifecycle", "thresholds", "sweep", "detection", "conformance"),
}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in RULES:
            return ".".join(parts[:n])
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def suite_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.split(".")[0] in SUITE}


def allowed(importer: str, imported: str) -> bool:
    room = room_of(importer)
    return room is not None and any(imported == r or imported.startswith(r + ".")
                                    for r in (room, *RULES[room]))


def breaches(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        importer = module_name(path)
        if room_of(importer) is None:
            found.append(f"{importer} has no import rule")
            continue
        found += [f"{importer} imports {m}" for m in sorted(suite_imports(path)) if not allowed(importer, m)]
    return found


def tree_modules() -> list[Path]:
    """Every module of the suite: its folders' and the checkout's top-level files."""
    return sorted([*ROOT.glob("*.py"), *(p for top in SUITE for p in (ROOT / top).rglob("*.py"))])


def test_every_module_keeps_the_one_way_import_rule() -> None:
    modules = tree_modules()
    assert {ROOT / "conftest.py", ROOT / "fixtures" / "plugin" / "servers.py"} <= set(modules)
    assert breaches(modules) == []


def test_every_room_of_the_harness_has_a_rule() -> None:
    rooms = {p.name for p in (ROOT / "fixtures").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in (ROOT / "fixtures").glob("*.py") if p.stem != "__init__"}
    assert {f"fixtures.{r}" for r in rooms | modules} <= set(RULES)


def test_the_rule_refuses_an_import_against_it(tmp_path: Path) -> None:
    module = ROOT / "fixtures" / "reporting" / "_probe_breach.py"
    assert module_name(module) == "fixtures.reporting._probe_breach"
    stray = tmp_path / "probe.py"
    stray.write_text("def f():\n    from fixtures.plugin import phases\n")
    assert suite_imports(stray) == {"fixtures.plugin", "fixtures.plugin.phases"}
    assert not allowed("fixtures.reporting.benchmark", "fixtures.plugin.phases")
    assert not allowed("fixtures.in_target.offline_host", "fixtures.errors")
    assert not allowed("vllm_lifecycle.faults.plugin", "fixtures.spec.catalog")
    assert allowed("fixtures.plugin.servers", "fixtures.launching.server")
    assert allowed("fixtures.judging.judges", "fixtures.judging.delivery")
    assert not allowed("conformance.flags.test_sleep_flags", "fixtures.plugin.servers")
    assert allowed("conformance.flags.test_sleep_flags", "fixtures.protocol.parts")
    assert not allowed("fixtures.protocol.parts", "fixtures.judging.judges")


def test_a_module_without_a_rule_is_refused() -> None:
    assert room_of("tools.probe") is None and room_of("setup") is None
    assert not allowed("tools.probe", "fixtures.errors")
    # Refused by name before it is read: these files need not exist.
    assert breaches([ROOT / "tools" / "probe.py", ROOT / "setup.py"]) == [
        "tools.probe has no import rule", "setup has no import rule"]


def test_installing_the_suite_adds_one_import_name() -> None:
    """`pip install -e .` (tox's cpu and installed envs) puts only what vLLM's own processes load
    into the target's environment; the harness and tests are found from the checkout."""
    text = (ROOT / "pyproject.toml").read_text()
    include = re.search(r"\[tool\.setuptools\.packages\.find\]\s*include\s*=\s*\[([^\]]*)\]", text)
    assert include, "pyproject.toml names no packages to install"
    names = {n.strip().strip('"') for n in include.group(1).split(",") if n.strip()}
    assert {n.split(".")[0] for n in names} == {"vllm_lifecycle"}, names
    plugins = re.findall(r'^\w+\s*=\s*"([\w.]+):\w+"', text, flags=re.M)
    assert plugins and all(p.startswith("vllm_lifecycle.") for p in plugins), plugins
    # What vLLM's processes import stays inside the installed package.
    assert breaches(sorted((ROOT / "vllm_lifecycle").rglob("*.py"))) == []
