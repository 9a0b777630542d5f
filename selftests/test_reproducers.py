"""The findings' standalone reproducers (conformance/reproducers/): findings.yaml alone says which
case shows which entry, and every entry but a platform limit names existing cases that say what
its `vllm_says` says, every case named by some entry; each script is standalone (stdlib and
requests, or vLLM inside its functions), keeps the shared part word for word, speaks vLLM's words
and none of the suite's, and its verdict follows what the server answers. Plus the pure planning
of a verification run."""

from __future__ import annotations

import ast
import http.server
import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from packaging.specifiers import SpecifierSet

from fixtures.errors import HarnessError
from fixtures.reporting.issue_drafts import jargon
from fixtures.reproducing.plan import Need, need_of, plan, reconcile, render_markdown, verdict
from fixtures.spec.catalog import CatalogError, load_catalog
from fixtures.spec.expectations import Expectation, Quote, load_expectations, parse_scope
from fixtures.spec.record import Record
from fixtures.spec.reproducers import (
    REPRODUCERS_DIR,
    expected_exit,
    parse_reproducer,
    release_side,
    reproducer_of,
    reproducer_problems,
)

SCRIPTS = sorted(REPRODUCERS_DIR.glob("*.py"))
COMMON_START = "# ---- common to every"
COMMON_END = "# ---- end of the common part ----"


@cache
def described(script: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(REPRODUCERS_DIR / script), "--describe"],
                          capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout)


def python_api(path: Path) -> bool:
    return all(entry.get("python_api") for entry in described(path.name).values())


# A platform limit has no reproducer: vLLM itself says the platform lacks the feature (CPU sleep
# frees nothing).
def platform_limits() -> set[str]:
    return {e.behaviour for e in load_expectations(load_catalog()) if e.kind == "platform"}


def test_findings_yaml_and_the_scripts_agree_case_for_case() -> None:
    expectations = load_expectations(load_catalog())
    assert len(expectations) >= 20
    scripts = {path.name: described(path.name) for path in SCRIPTS}
    assert reproducer_problems(scripts, expectations) == []
    for exp in expectations:
        repro = reproducer_of(exp)
        if exp.kind == "platform":
            assert repro is None, f"{exp.behaviour}: a platform limit names no reproducer"
        elif repro is not None:
            need_of(repro.script, scripts[repro.script], repro.cases)  # the cases need one server


SAID = ("vLLM's words.", "v1/x.py, a docstring")
SCRIPTS_OF_HAND = {"s.py": {"a": {"says": list(SAID)}, "b": {"says": list(SAID)}},
                   "t.py": {"c": {"says": list(SAID)}}}


def entry(behaviour: str, reproducer: str | None, said: tuple[str, str] | None = SAID,
          kind: str = "finding") -> Expectation:
    return Expectation(kind, behaviour, parse_scope(behaviour, {"profiles": ["0.32"]}),  # type: ignore[arg-type]
                       re.compile("x"), {"reproducer": reproducer} if reproducer else {},
                       vllm_says=None if said is None else Quote(*said))


def test_agreeing_scripts_and_entries_have_no_problem() -> None:
    entries = [entry("a/ab", "s.py --case a --case b"), entry("a/c", "t.py"),  # no case: every case
               entry("a/limit", None, ("CPU lacks it.", "v1/y.py, a log line"), kind="platform")]
    assert reproducer_problems(SCRIPTS_OF_HAND, entries) == []


@pytest.mark.parametrize(("entries", "problem"), [
    ([entry("a/ab", "s.py"), entry("a/c", "t.py"), entry("a/none", None)], "a/none: names no reproducer"),
    ([entry("a/ab", "s.py"), entry("a/c", "t.py"), entry("a/gone", "u.py")],
     "a/gone: reproducer u.py is not in"),
    ([entry("a/ab", "s.py --case a --case b --case z"), entry("a/c", "t.py")], "a/ab: s.py has no case z"),
    ([entry("a/ab", "s.py"), entry("a/c", "t.py", ("vLLM's words", SAID[1]))],
     "a/c: t.py --case c says (\"vLLM's words.\", 'v1/x.py, a docstring'), not the entry's vllm_says "
     "(\"vLLM's words\", 'v1/x.py, a docstring')"),
    ([entry("a/ab", "s.py"), entry("a/c", "t.py", (SAID[0], "v1/x.py, a comment"))],
     "a/c: t.py --case c says"),
    ([entry("a/ab", "s.py"), entry("a/c", "t.py", None)], "not the entry's vllm_says None"),
    ([entry("a/ab", "s.py --case a"), entry("a/c", "t.py")], "s.py: case b is named by no entry"),
], ids=["no-reproducer", "no-script", "no-case", "other-quote", "other-place", "no-vllm-says",
        "unnamed-case"])
def test_each_disagreement_is_named(entries: list[Expectation], problem: str) -> None:
    (found,) = reproducer_problems(SCRIPTS_OF_HAND, entries)
    assert found.startswith(problem) or problem in found, found


def common_part(path: Path) -> str:
    text = path.read_text()
    start, end = text.index(COMMON_START), text.index(COMMON_END)
    return text[start:end]


@pytest.mark.parametrize("api", [False, True], ids=["http", "python-api"])
def test_the_shared_part_is_the_same_in_every_script(api: bool) -> None:
    parts = {p.name: common_part(p) for p in SCRIPTS if python_api(p) == api}
    assert len(parts) >= 4
    first = next(iter(parts.values()))
    assert [name for name, part in parts.items() if part != first] == []


def test_scripts_speak_vllms_words_not_the_suites() -> None:
    """Nothing in a script, code and comments included, names the suite's behaviours, variants,
    profiles, catalog or paths: findings.yaml alone maps a finding to a case."""
    catalog = load_catalog()
    for path in SCRIPTS:
        assert jargon(path.read_text(), catalog) == [], path.name
    assert jargon('CASES = {"a": Case("a", ("custody/abort-held-request",), ...)}', catalog)


def shows_as(path: Path) -> str:
    """What the script's verdict calls exit 1: the second argument of its main()."""
    tree = ast.parse(path.read_text())
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name) and node.func.id == "main")
    said = call.args[1]
    if isinstance(said, ast.Name):
        return str(next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                        and any(isinstance(t, ast.Name) and t.id == said.id for t in n.targets)))
    return str(ast.literal_eval(said))


def test_only_a_bug_is_called_a_bug() -> None:
    """A [Bug] script's verdict says BUG; a [Feature] one (hardening, a preview of a proposed
    contract) never does and says it is a feature request; findings.yaml's kind agrees."""
    kinds: dict[str, set[str | None]] = {}
    for exp in load_expectations(load_catalog()):
        if (repro := reproducer_of(exp)) is not None:
            kinds.setdefault(repro.script, set()).add(exp.finding_kind)
    for path in SCRIPTS:
        title = (ast.get_docstring(ast.parse(path.read_text())) or "").partition(":")[0]
        said = shows_as(path)
        assert title in ("[Bug]", "[Feature]"), path.name
        if title == "[Bug]":
            assert said == "BUG", path.name
        else:
            assert "BUG" not in said.upper() and "feature request" in said, path.name
        agrees = kinds[path.name] == {"bug"} if title == "[Bug]" else "bug" not in kinds[path.name]
        assert agrees, f"{path.name}: findings.yaml calls what it shows {sorted(map(str, kinds[path.name]))}"


def test_scripts_are_standalone() -> None:
    """HTTP scripts import the standard library and requests; Python-API scripts import vLLM only
    inside their functions; none imports the suite."""
    stdlib = set(sys.stdlib_module_names)
    for path in SCRIPTS:
        tree = ast.parse(path.read_text())
        allowed = stdlib | ({"__future__"} if python_api(path) else {"__future__", "requests"})
        top = imported(tree.body)
        assert top <= allowed, f"{path.name} imports {sorted(top - allowed)} at the top"
        assert not imported(ast.walk(tree)) & {"fixtures", "vllm_lifecycle", "thresholds", "conformance"}, \
            path.name


def imported(nodes: Iterable[ast.AST]) -> set[str]:
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return found


# --- a reproducer's verdict follows the server's answers ---------------------------------------

class Stub(http.server.BaseHTTPRequestHandler):
    """Answers /version and POST /release_kv_cache_memory with what the test asks for."""

    release: tuple[int, dict[str, Any]] = (200, {})

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._send(*((200, {"version": "0.0.0-stub"}) if self.path == "/version" else (404, {})))

    def do_POST(self) -> None:
        self._send(*(self.release if self.path == "/release_kv_cache_memory" else (404, {})))


@pytest.fixture
def stub() -> Iterator[type[Stub]]:
    handler = type("Handler", (Stub,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()


NAMING = "release_kv_cache_memory() requires a completed pause first"


@pytest.mark.parametrize(("answer", "code"), [
    ((500, {"error": {"message": NAMING, "code": 500}}), 1),  # 0.32: the precondition as a 5xx
    ((400, {"error": {"message": NAMING, "code": 400}}), 0),  # the caller's error, named
    ((400, {"error": {"message": "bad", "code": 400}}), 1),   # a 4xx that does not say why
    ((404, {"detail": "Not Found"}), 2),                      # no such route: cannot tell
], ids=["500", "400-naming", "400-silent", "404"])
def test_the_verdict_follows_the_answer(stub: type[Stub], answer: tuple[int, dict[str, Any]],
                                        code: int) -> None:
    stub.release = answer
    script = REPRODUCERS_DIR / "release_kv_out_of_order_500.py"
    done = subprocess.run([sys.executable, str(script), stub.url, "--case", "awake"],  # type: ignore[attr-defined]
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == code, done.stdout
    quote, where = described(script.name)["awake"]["says"]
    assert "POST /release_kv_cache_memory -> " in done.stdout
    assert f"vLLM says ({where}): {quote}" in done.stdout
    verdict = {1: "the caller's error is reported as a server error (feature request)", 0: "behaves",
               2: "could not tell"}[code]
    assert f"verdict: {verdict}" in done.stdout and f"result: exit {code} ({verdict})" in done.stdout
    assert jargon(done.stdout, load_catalog()) == [], "the output speaks the suite's words"


def test_the_tied_head_reproducer_swaps_two_rows_of_embed_tokens_byte_for_byte(tmp_path: Path) -> None:
    """Its checkpoint copy, read and written with the standard library (the script needs only
    requests): rows i and j of every embed_tokens tensor swapped, every other byte kept."""
    import importlib.util
    import struct

    path = REPRODUCERS_DIR / "tied_head_stale_after_reload.py"
    spec = importlib.util.spec_from_file_location("tied_head_reproducer", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = script  # its dataclasses look their module up
    spec.loader.exec_module(script)
    rows = [bytes([r] * 4) for r in range(4)]  # four rows of two float16s
    header = {"model.embed_tokens.weight": {"dtype": "F16", "shape": [4, 2], "data_offsets": [0, 16]},
              "model.norm.weight": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}}
    head = json.dumps(header).encode()
    body = b"".join(rows) + bytes(range(100, 108))
    model, into = tmp_path / "model", tmp_path / "copy"
    model.mkdir(), into.mkdir()
    (model / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + body)
    (model / "config.json").write_text('{"tie_word_embeddings": true}')
    script.swapped_copy(model, 1, 3, into)
    copied = (into / "model.safetensors").read_bytes()[8 + len(head):]
    assert copied == rows[0] + rows[3] + rows[2] + rows[1] + bytes(range(100, 108))
    assert (into / "config.json").is_symlink() and (model / "model.safetensors").read_bytes().endswith(body)


def test_no_server_is_could_not_tell() -> None:
    done = subprocess.run([sys.executable, str(REPRODUCERS_DIR / "sleep_params_unvalidated.py"),
                           "http://127.0.0.1:9"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "GET /version -> None no answer" in done.stdout
    assert "result: exit 2 (could not tell)" in done.stdout


# --- findings.yaml's reproducer field and the exit a release must give -------------------------

def test_parse_reproducer() -> None:
    repro = parse_reproducer("x/y", "s.py --case a --case b")
    assert (repro.script, repro.cases) == ("s.py", ("a", "b"))
    assert repro.command("http://h:1") == "python conformance/reproducers/s.py http://h:1 --case a --case b"
    for bad in ("", "s.sh", "dir/s.py", "s.py --case", "s.py --other a"):
        with pytest.raises(CatalogError):
            parse_reproducer("x/y", bad)


@pytest.mark.parametrize(("spec", "release", "side"), [
    (">=0.27,<0.31", "0.30.0", "inside"), (">=0.27,<0.31", "0.31.0", "above"),
    (">=0.27,<0.31", "0.26.1", "below"), ("==0.32.*", "0.33.0", "above"),
    ("==0.32.*", "0.31.2", "below"), (">=0.31,<0.33", "0.32.0+cpu", "inside"),
    ("!=0.30.0", "0.30.0", "unknown"), (None, "nonsense", "unknown"),
])
def test_release_side(spec: str | None, release: str, side: str) -> None:
    assert release_side(SpecifierSet(spec) if spec else None, release) == side


def expectation(raw_scope: dict[str, Any], kind: str = "finding") -> Expectation:
    import re

    return Expectation(kind, "misuse/invalid-mode", parse_scope("t", raw_scope), re.compile("x"),  # type: ignore[arg-type]
                       {"reproducer": "sleep_params_unvalidated.py --case mode-foo"})


def test_expected_exit() -> None:
    gauge = expectation({"profiles": ["0.32"], "releases": ">=0.27,<0.31", "platforms": ["cpu"]})
    assert expected_exit(gauge, "0.30.0", "cpu", "0.32").exit == 1
    assert expected_exit(gauge, "0.32.0+cpu", "cpu", "0.32").exit == 0  # fixed there
    assert expected_exit(gauge, "0.30.0", "cuda", "0.32").exit is None  # never seen on a GPU
    assert expected_exit(gauge, "0.26.0", "cpu", "0.32").exit is None
    tentative = expectation({"profiles": ["0.32", "0.33"]}, "tentative")
    assert expected_exit(tentative, "0.33.1", "cuda", "0.33").exit == 1
    assert expected_exit(tentative, "0.33.1", "cuda", "layered").exit is None


# --- planning a verification ----------------------------------------------------------------

def test_cases_of_one_finding_need_one_server() -> None:
    cases = {"a": {"serve_args": [], "engines": 1},
             "b": {"serve_args": [], "engines": 2},
             "c": {"serve_args": [], "engines": 1, "leaves_server_dead": True}}
    assert need_of("s.py", cases, ["a", "c"]) == Need(False, (), (), 1, leaves_server_dead=True)
    with pytest.raises(HarnessError, match="different servers"):
        need_of("s.py", cases, ["a", "b"])
    with pytest.raises(HarnessError, match="no case z"):
        need_of("s.py", cases, ["z"])


def test_plan_orders_servers_and_judges_each_release() -> None:
    expectations = load_expectations(load_catalog())
    scripts = {p.name: described(p.name) for p in SCRIPTS}
    runs = plan(expectations, scripts, "0.32.0+cpu", "cpu", "0.32")
    assert len(runs) == len(expectations) - len(platform_limits())
    api = [r.need.python_api for r in runs]
    assert api == sorted(api), "Python-API runs come after every server run"
    by_id = {r.expectation.behaviour: r.expected.exit for r in runs}
    assert by_id["misuse/invalid-mode"] == 0 and by_id["weights/session-rules"] == 1
    assert {r.expectation.behaviour: r.expected.exit for r in plan(
        expectations, scripts, "0.30.0", "cpu", "0.32")}["misuse/invalid-mode"] == 1


def test_verdicts_and_summary() -> None:
    assert verdict(1, 1) == ("reproduces", True)
    assert verdict(0, 0) == ("fixed here", True)
    assert verdict(1, 0) == ("stopped reproducing", False)
    assert verdict(0, 1) == ("reproduces outside its scope", False)
    assert verdict(1, 2) == ("could not tell", False)
    assert verdict(1, None) == ("timed out", False)
    assert verdict(None, None) == ("not judged here", True)
    record = {"behaviour": "a/b", "kind": "finding", "command": "python x.py URL", "expected_exit": 1,
              "expected_why": "in scope", "exit": 0, "seconds": 1.0, "log": "reproducers/a__b.log"}
    record["verdict"], record["ok"] = verdict(1, 0)
    text = render_markdown({"records": [record], "ok": False, "target": {}})
    assert "**FAIL**: 1 stopped reproducing" in text and "a/b: stopped reproducing" in text


def test_a_reproducer_that_stops_where_the_test_passes_shows_the_fix() -> None:
    def record(behaviour: str) -> dict[str, Any]:
        entry: dict[str, Any] = {"behaviour": behaviour, "kind": "finding", "command": "x", "exit": 0,
                                 "expected_exit": 1, "expected_why": "", "seconds": 1.0, "log": "l"}
        entry["verdict"], entry["ok"] = verdict(1, 0)
        return entry

    suite = [Record.from_dict({"nodeid": "t", "variant": None, "transport": "http"} | r) for r in (
        {"behaviour": "a/fixed", "outcome": "finding-fixed"},
        {"behaviour": "a/still", "outcome": "finding"}, {"behaviour": "a/still", "outcome": "skip"})]
    fixed, still, alone = reconcile([record("a/fixed"), record("a/still"), record("a/alone")], suite)
    assert (fixed["verdict"], fixed["ok"]) == ("fixed in this release", True)
    assert (still["verdict"], still["ok"]) == ("stopped reproducing (the suite's test: finding)", False)
    assert (alone["verdict"], alone["ok"]) == ("stopped reproducing", False)
    text = render_markdown({"records": [fixed], "ok": True, "target": {}})
    assert "a/fixed: the suite's test passes (finding-fixed) and the reproducer exits 0" in text


def test_the_verification_names_a_missing_script_interpreter(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The reproducers run from their own folder: the interpreter is looked up from the caller's
    (a relative path included) before anything starts, and one that is not there is named."""
    from fixtures.reproducing import verify

    with pytest.raises(SystemExit) as stopped:
        verify.main(["--script-python", "no-such-venv/bin/python", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "--script-python 'no-such-venv/bin/python': no such interpreter" in capsys.readouterr().err


def test_the_verification_runs_on_the_embedded_models_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fixtures.reproducing import verify

    assert verify.parse_models("llama") == ["llama"]
    assert verify.parse_models("qwen2, llama,qwen2") == ["qwen2", "llama"]
    with pytest.raises(SystemExit) as stopped:
        verify.main(["--model", "llama,gpt", "--out", str(tmp_path)])
    assert stopped.value.code == 2
    assert "--model 'llama,gpt': name one or more of llama, qwen2" in capsys.readouterr().err
    record = {"behaviour": "a/b", "kind": "finding", "model": "qwen2", "command": "python x.py URL",
              "expected_exit": 1, "expected_why": "in scope", "exit": 0, "seconds": 1.0, "log": "l"}
    record["verdict"], record["ok"] = verdict(1, 0)
    text = render_markdown({"records": [record], "ok": False, "target": {},
                            "models": {"qwen2": "tiny-qwen2-x"}, "seconds_per_model": {"qwen2": 12.5}})
    assert "models qwen2 (tiny-qwen2-x)" in text and "(qwen2 12.5 s)" in text
    assert "| a/b | finding | qwen2 |" in text and "- a/b (on qwen2): stopped reproducing" in text


def _cpu_target() -> Any:
    from fixtures.launching.target import TargetInfo

    return TargetInfo(python=sys.executable, distribution=None, vllm_version="0.32.0+cpu",
                      torch_version="2.9.0", platform="cpu", has_triton=False, cuda_available=False,
                      device_name=None)


def test_reproducers_sharing_a_server_form_one_unit(tmp_path: Path) -> None:
    """A unit runs in one lane: every run once, the runs of one server together, a run that
    leaves its server dead and each Python-API run alone."""
    from fixtures.reproducing import verify

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    runs = plan(load_expectations(load_catalog()), {p.name: described(p.name) for p in SCRIPTS},
                "0.32.0+cpu", "cpu", "0.32")
    units = verify.units(runs, _cpu_target(), model)
    assert sorted(id(r) for u in units for r in u) == sorted(id(r) for r in runs)
    for unit in units:
        if unit[0].need.python_api or unit[0].need.leaves_server_dead:
            assert len(unit) == 1
        else:
            assert len({(r.need.serve_args, r.need.engines) for r in unit}) == 1
            assert not any(r.need.python_api or r.need.leaves_server_dead for r in unit)
    assert [u[0].need.python_api for u in units] == sorted(u[0].need.python_api for u in units)
    assert any(len(u) > 1 for u in units), "no two reproducers share a server"


def test_lanes_run_units_side_by_side_and_hand_back_a_failure(tmp_path: Path) -> None:
    from fixtures.launching.server import ServerManager
    from fixtures.reproducing import verify

    def manager_on(folder: str) -> ServerManager:
        return ServerManager(launcher=("unused",), log_dir=tmp_path / folder, start_timeout=1.0)

    whole, lanes = verify.lanes_for([0, 1], manager_on)
    assert whole.cores == [0, 1] and [lane.cores for lane in lanes] == [[0], [1]]
    both_running = threading.Barrier(2, timeout=10)  # broken (an error) unless two lanes run at once
    ran: list[tuple[str, list[int]]] = []

    def run_unit(unit: list[Any], lane: verify.Lane) -> None:
        if unit[0] in ("a", "b"):
            both_running.wait()
        ran.append((unit[0], lane.cores))

    verify.run_side_by_side([["a"], ["b"], ["c"]], lanes, verify.Scripts(), run_unit)
    assert sorted(name for name, _ in ran) == ["a", "b", "c"]
    assert {tuple(cores) for name, cores in ran if name in "ab"} == {(0,), (1,)}

    def failing(unit: list[Any], lane: verify.Lane) -> None:
        if unit[0] == "b":
            raise RuntimeError("lane broke")
        ran.append((unit[0], lane.cores))

    ran.clear()
    with pytest.raises(RuntimeError, match="lane broke"):
        verify.run_side_by_side([["a"], ["b"], ["c"]], lanes, verify.Scripts(), failing)
    assert sorted(name for name, _ in ran) == ["a", "c"]


def test_a_stop_ends_the_reproducers_running(tmp_path: Path) -> None:
    from fixtures.reproducing import verify

    scripts = verify.Scripts()
    done: list[tuple[int | None, float]] = []
    worker = threading.Thread(target=lambda: done.append(scripts.run(
        [sys.executable, "-c", "import time; time.sleep(60)"], None, 120, tmp_path / "run.log")))
    worker.start()
    for _ in range(100):
        if scripts._live:
            break
        threading.Event().wait(0.05)
    scripts.stop()
    worker.join(timeout=20)
    assert done and done[0][0] is None and done[0][1] < 20


def test_a_harness_error_while_running_is_one_line_and_exit_2(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A machine that cannot hold a reproducer's engines is named, not a traceback."""
    from fixtures.errors import ConfigError
    from fixtures.reproducing import verify

    def no_cores(*args: object, **kwargs: object) -> list[dict[str, Any]]:
        raise ConfigError("2 data-parallel engines need 2 CPU cores; 1 available")

    monkeypatch.setattr(verify, "probe_target", lambda python: _cpu_target())
    monkeypatch.setattr(verify, "embedded_model", lambda python, name="llama": tmp_path / name)
    monkeypatch.setattr(verify, "execute", no_cores)
    assert verify.main(["--out", str(tmp_path / "out")]) == 2
    said = capsys.readouterr().err.strip()
    assert said == "reproducers: 2 data-parallel engines need 2 CPU cores; 1 available"
