"""GPU readiness without a GPU: every variant's launch arguments meet vLLM's own parser.

The coverage test needs no vLLM; the parser tests run only where vLLM is importable (the cpu and
installed envs; `python -m fixtures.launching.launch_check` is the same check as a command).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from fixtures.axes.variants import VARIANTS
from fixtures.launching import launch_check

ROOT = Path(__file__).resolve().parent.parent


def _flags_in(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.startswith("--")}


def suite_flags() -> set[str]:
    """Every flag the suite passes at launch: the launch recipes and tests' with_args."""
    flags = _flags_in(ast.parse((ROOT / "fixtures" / "launching" / "recipes.py").read_text()))
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
