"""GPU readiness without a GPU: every variant's launch arguments meet vLLM's own parser.

The coverage test needs no vLLM; the parser tests run only where vLLM is importable (the cpu and
installed envs; `python -m fixtures.launching.launch_check` is the same check as a command).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from fixtures.axes.variants import VARIANTS, Variant
from fixtures.launching import launch_check
from fixtures.launching.environments import SLEEP_MODE_FLAG
from fixtures.spec.upstream_snapshot import ServerArgs, Snapshot, load_snapshot

ROOT = Path(__file__).resolve().parent.parent


def _flags_in(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and re.fullmatch(r"--[a-z0-9-]+", n.value)}


def suite_flags() -> set[str]:
    """Every flag the suite passes at launch: the launch recipes and tests' with_args."""
    flags: set[str] = set()
    for module in ("recipes.py", "environments.py"):
        flags |= _flags_in(ast.parse((ROOT / "fixtures" / "launching" / module).read_text()))
    for path in (ROOT / "conformance").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "with_args":
                flags |= _flags_in(node)
    for variant in VARIANTS:
        flags |= {a for a in variant.launch_args if a.startswith("--")}
    return flags


def test_the_check_builds_every_flag_the_suite_launches_with():
    checked = {a for launch in launch_check.launches() for a in launch_check.arguments(launch)}
    assert "--enable-prompt-tokens-details" in suite_flags()  # the scan reads the fixtures
    missing = sorted(suite_flags() - checked)
    assert not missing, f"expected launch_check to build every launch flag; not checked: {missing}"
    names = {launch.name for launch in launch_check.launches()}
    assert {f"{v.name}/embedded/shared" for v in VARIANTS} <= names
    assert "MRV2-graph/Qwen/Qwen3-0.6B/offline-AsyncLLM-MP0" in names


def test_arguments_are_what_the_server_manager_passes():
    launch = next(launch_check.launches())
    argv = launch_check.arguments(launch)
    assert argv[:2] == ["--model", "embedded"] and "--enforce-eager" in argv
    assert argv[argv.index("--max-model-len") + 1] == "131072" and "--port" in argv


# -- parity with vLLM's own lifecycle tests (conformance/upstream_snapshot.yaml), no vLLM --------

def test_every_gpu_launch_starts_as_vllms_lifecycle_tests_do():
    upstream = load_snapshot()
    gpu = [launch for launch in launch_check.launches() if launch.sleep_mode_platform]
    cpu = [launch for launch in launch_check.launches() if not launch.sleep_mode_platform]
    assert gpu and cpu and {launch.offline for launch in gpu} == {True, False}
    assert [p for launch in gpu for p in launch_check.parity_problems(launch, upstream)] == []
    assert all(SLEEP_MODE_FLAG in launch_check.arguments(launch) for launch in gpu)
    # vLLM refuses sleep mode where its platform has none: the CPU launches stay as they were.
    assert not any(SLEEP_MODE_FLAG in launch_check.arguments(launch) for launch in cpu)


def test_what_the_suite_does_not_follow_is_upstreams_and_never_sleep_mode():
    upstream = load_snapshot()
    stale = set(launch_check.NOT_FOLLOWED) - upstream.flag_names
    assert not stale, f"exemptions of flags upstream no longer passes: {stale}"
    assert not {SLEEP_MODE_FLAG, "--gpu-memory-utilization"} & set(launch_check.NOT_FOLLOWED)
    assert all(reason.strip() for reason in launch_check.NOT_FOLLOWED.values())


UPSTREAM = Snapshot("0.32.0", (
    ServerArgs("tests/rl/conftest.py::ARGS", (("--enable-sleep-mode", None), ("--enforce-eager", None),
                                             ("--gpu-memory-utilization", "0.75"), ("--dtype", "bfloat16"))),
    ServerArgs("tests/rl/test_x.py::t::args", (("--enable-sleep-mode", None), ("--swap-space", "4"))),
), "tests/rl", ("test_x.py::t",))


def _gpu(label: str, graphs: bool = False) -> launch_check.Launch:
    return next(launch for launch in launch_check.launches() if launch.sleep_mode_platform
                and launch.config.label == label and launch.config.variant.cuda_graphs == graphs)


def _without(launch: launch_check.Launch, *drop: str, **replace: str) -> launch_check.Launch:
    args = list(launch.config.args)
    for flag in drop:
        del args[args.index(flag)]
    for flag, value in replace.items():
        args[args.index(flag) + 1] = value
    return dataclasses.replace(launch, config=dataclasses.replace(launch.config, args=tuple(args)))


@pytest.mark.parametrize("label", ["shared", "offline-LLM-MP1"])
def test_a_gpu_launch_unlike_upstreams_is_a_problem(label: str):
    launch = _gpu(label)
    found = launch_check.parity_problems(_without(launch, SLEEP_MODE_FLAG), UPSTREAM)
    assert found == [f"{launch.name}: lacks --enable-sleep-mode, which vLLM 0.32.0's lifecycle tests "
                     f"pass (tests/rl/conftest.py::ARGS)",
                     f"{launch.name}: lacks --swap-space, which vLLM 0.32.0's lifecycle tests pass "
                     f"(tests/rl/test_x.py::t::args)"]
    other = _without(launch, **{"--gpu-memory-utilization": "0.9"})
    assert f"{launch.name}: passes --gpu-memory-utilization 0.9; vLLM 0.32.0's lifecycle tests pass 0.75" \
        in launch_check.parity_problems(other, UPSTREAM)
    # --dtype is not followed, with its reason; --enforce-eager is the eager variants' own.
    assert not any("--dtype" in p or "--enforce-eager" in p
                   for p in launch_check.parity_problems(launch, UPSTREAM))


def test_the_graph_variant_need_not_turn_graphs_off_but_an_eager_one_must(monkeypatch):
    assert launch_check.parity_problems(_gpu("shared", graphs=True), load_snapshot()) == []
    eager = _gpu("shared")
    monkeypatch.setattr(Variant, "launch_args", property(lambda self: ()))  # no variant turns graphs off
    assert launch_check.parity_problems(_gpu("shared", graphs=True), load_snapshot()) == []
    assert launch_check.parity_problems(eager, load_snapshot()) == [
        f"{eager.name}: lacks --enforce-eager, which vLLM 0.32.0's lifecycle tests pass "
        f"(tests/entrypoints/rl/conftest.py::_BASE_ARGS)"]


def test_a_cpu_launch_is_not_held_to_sleep_mode():
    cpu = next(launch for launch in launch_check.launches() if not launch.sleep_mode_platform)
    assert launch_check.parity_problems(cpu, UPSTREAM) == []


@pytest.fixture(scope="module")
def vllm_parser():
    pytest.importorskip("vllm", reason="vLLM is not installed here (the cpu/installed envs run this; "
                                       "or `python -m fixtures.launching.launch_check`)")
    return launch_check.run  # imports vLLM's parser on first use


def test_every_variants_launch_parses_with_vllms_own_parser(vllm_parser):
    assert vllm_parser() == []


def test_a_bad_flag_or_variable_is_refused(vllm_parser):
    base = next(launch_check.launches())
    # (argparse takes an unambiguous prefix such as --enable-sleep-mod, so vLLM would too)
    typo = launch_check.Launch("typo", base.config.with_args("--enable-sleeep-mode"))
    env = launch_check.Launch("env", base.config.with_env(VLLM_USE_V2_MODEL_RUNER="1"))
    offline = next(launch for launch in launch_check.launches() if launch.offline)
    host = launch_check.Launch("host", dataclasses.replace(
        offline.config, args=(*offline.config.args, "--kv-cache-dtype", "fp8")))
    problems = vllm_parser([typo, env, host])
    assert problems[0].startswith("typo: refused --model embedded") and problems[0].endswith(
        "unrecognized arguments: --enable-sleeep-mode"), problems
    assert problems[1] == ("env: sets VLLM_USE_V2_MODEL_RUNER, which vLLM does not know (vllm.envs)")
    assert problems[2].startswith("host: refused --model embedded"), problems
    assert "unrecognized arguments: --kv-cache-dtype" in problems[2]
    assert len(problems) == 3
