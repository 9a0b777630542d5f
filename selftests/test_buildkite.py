"""The Buildkite steps upstream can include: they parse, and every step runs something real."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from fixtures.config import OPTIONS
from fixtures.variants import VARIANTS

ROOT = Path(__file__).resolve().parent.parent
PIPELINE = ROOT / ".buildkite" / "lifecycle-conformance.yaml"
# The lifecycle files a step must watch (issue: engine core, core client, async LLM, executor,
# GPU worker, sleep/RL routers, metrics loggers).
REQUIRED_SOURCES = {
    "vllm/v1/engine/core.py", "vllm/v1/engine/core_client.py", "vllm/v1/engine/async_llm.py",
    "vllm/v1/executor/", "vllm/v1/worker/gpu_worker.py", "vllm/entrypoints/serve/dev/sleep/",
    "vllm/entrypoints/rl/", "vllm/v1/metrics/loggers.py",
}


@pytest.fixture(scope="module")
def steps():
    data = yaml.safe_load(PIPELINE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("steps"), list) and data["steps"]
    return data["steps"]


def _pytest_args(step) -> list[list[str]]:
    runs = []
    for command in step["commands"]:
        for part in command.split("&&"):
            words = shlex.split(part)
            if "pytest" in words or "tox" in words:
                runs.append(words)
    return runs


def test_every_step_has_the_fields_vllm_ci_reads(steps):
    for step in steps:
        assert set(step) >= {"label", "timeout_in_minutes", "num_gpus", "source_file_dependencies",
                             "commands"}, step.get("label")
        assert 0 < step["timeout_in_minutes"] <= 120
        assert set(step["source_file_dependencies"]) >= REQUIRED_SOURCES, step["label"]
        assert all(src.startswith("vllm/") for src in step["source_file_dependencies"])


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
    assert len(cpu) == 1 and any("tox" in w and "cpu" in w for w in _pytest_args(cpu[0]))


def test_every_suite_option_a_step_passes_exists(steps):
    flags = {o.flag for o in OPTIONS}
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
