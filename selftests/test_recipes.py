"""Launch recipes as pure functions on hand-made values: what each server the suite starts is
launched with, and why a topology is not served."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from fixtures.axes.offline_engines import BY_NAME
from fixtures.axes.topologies import topology_named
from fixtures.axes.variants import VARIANTS
from fixtures.errors import ConfigError, HarnessError
from fixtures.in_target.tiny_model import TinyModelSpec, checkpoint_b_spec, default_cache_dir
from fixtures.launching import recipes
from fixtures.launching.config import build_config
from fixtures.launching.recipes import Placement
from fixtures.launching.server import LaunchConfig
from fixtures.launching.target import TargetInfo
from fixtures.launching.workers import Worker
from vllm_lifecycle.weight_transfer.sync_path import SyncPath

VARIANT = VARIANTS[0]
FOUR = Placement(cores=(0, 1, 2, 3))


def suite(**options: str):
    """The suite config of these options, on four cores chosen with --lifecycle-cpu-cores (so no
    recipe reads this machine's cores)."""
    given = {f"--lifecycle-{k.replace('_', '-')}": v for k, v in options.items()}
    given["--lifecycle-cpu-cores"] = "0-3"
    return build_config(given.get, {}, Path("/tmp/r"), allowed_cores=[0, 1, 2, 3])


def target(platform: str = "cpu", version: str = "0.32.0") -> TargetInfo:
    return TargetInfo(python="", distribution=None, vllm_version=version, torch_version="", platform=platform,
                      has_triton=False, cuda_available=platform == "cuda", device_name=None,
                      sleep_mode_available=platform in ("cuda", "rocm", "xpu"))


def local_model(tmp_path: Path) -> str:
    folder = tmp_path / "tiny"
    folder.mkdir()
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    return str(folder)


def test_the_base_config_of_the_embedded_model_on_cpu():
    config = recipes.base_config(VARIANT, suite(), target(), "/models/tiny", FOUR)
    env = dict(config.env)
    assert config.args[-3:] == ("--max-model-len", "131072", "--enable-scale-out")
    assert config.args[:4] == ("--enable-server-load-tracking", "--enable-log-requests",
                               "--enable-prefix-caching", "--enable-prompt-tokens-details")
    assert env == {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
                   "VLLM_CPU_OMP_THREADS_BIND": "0-2"}  # one core left to the API server and client
    assert (config.name, config.served_model_name, config.dev_mode, config.entry) == (
        f"{VARIANT.name}/shared", "lifecycle-model", True, ())
    # equal inputs, equal configs: the one server is reused
    assert config == recipes.base_config(VARIANT, suite(), target(), "/models/tiny", FOUR)


def test_the_base_config_follows_the_model_the_release_the_fault_and_the_platform(monkeypatch):
    older = target(version="0.31.0")
    faulty = suite(model="org/model", fault="keep-aborts")
    named = recipes.base_config(VARIANT, faulty, older, "org/model", FOUR)
    env = dict(named.env)
    assert "--max-model-len" not in named.args and "--enable-scale-out" not in named.args
    assert "HF_HUB_OFFLINE" not in env and env["VLLM_LIFECYCLE_FAULT"] == "keep-aborts"
    assert recipes.base_config(VARIANT, suite(max_model_len="4096"), target(), "m", FOUR).args[-3:-1] == (
        "--max-model-len", "4096")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    second = Placement(worker=Worker("gw1", 1, 2))
    gpu = dict(recipes.base_config(VARIANT, suite(), target("cuda"), "m", second).env)
    assert gpu["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1" and gpu["CUDA_VISIBLE_DEVICES"] == "1"
    assert "VLLM_CPU_OMP_THREADS_BIND" not in gpu


@pytest.mark.parametrize("platform", ["cuda", "xpu"])
def test_every_engine_on_a_platform_with_sleep_mode_starts_with_it(platform):
    memory = ("--enable-sleep-mode", "--gpu-memory-utilization", "0.75")
    on = target(platform)
    base = recipes.base_config(VARIANT, suite(), on, "m", Placement())
    offline = recipes.offline_config(VARIANT, suite(), on, "m", BY_NAME["LLM-MP1"], Placement())
    for config in (base, offline, recipes.offline_config(VARIANT, suite(), on, "m", BY_NAME["AsyncLLM-MP0"],
                                                         Placement())):
        at = config.args.index("--enable-sleep-mode")
        assert config.args[at:at + 3] == memory, config.args
    # vLLM refuses the flag where its platform has no sleep mode
    cpu = recipes.base_config(VARIANT, suite(), target(), "m", FOUR)
    assert not {"--enable-sleep-mode", "--gpu-memory-utilization"} & set(cpu.args)


def test_a_sync_path_of_the_users_replaces_the_suites_worker_extension():
    own = SyncPath("mine:push", sync=print, launch_args=("--worker-extension-cls", "mine.Extension"))
    args = recipes.base_config(VARIANT, replace(suite(), weight_sync=own), target(), "m", FOUR).args
    assert args.count("--worker-extension-cls") == 1
    assert args[-2:] == ("--worker-extension-cls", "mine.Extension")


def test_a_dp2_config_serves_the_moe_declared_model_with_one_core_set_per_rank(tmp_path):
    model = local_model(tmp_path)
    base = recipes.base_config(VARIANT, suite(), target(), model, FOUR)
    dp2 = topology_named("dp2")
    config = recipes.topology_config(base, dp2, suite(), target(), Placement((0, 1, 2, 3), whole=True))
    assert not isinstance(config, str)
    assert config.model == str(tmp_path / "tiny-moe-declared") and config.topology == dp2
    assert config.args[-2:] == ("--data-parallel-size", "2") and config.name == f"{VARIANT.name}/dp2"
    assert dict(config.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"
    assert recipes.devices_of(config, FOUR) == {"cpu_cores": [0, 1, 2, 3], "bind": "0-1|2-3"}
    # --lifecycle-dp-model names the model whatever is served otherwise
    named = recipes.topology_config(base, dp2, suite(dp_model="org/moe"), target(), FOUR)
    assert not isinstance(named, str) and named.model == "org/moe"


def test_a_tp2_config_serves_the_dense_model_with_one_core_set_per_worker(tmp_path, monkeypatch):
    model = local_model(tmp_path)
    base = recipes.base_config(VARIANT, suite(), target(), model, FOUR)
    tp2 = topology_named("tp2")
    config = recipes.topology_config(base, tp2, suite(), target(), Placement((0, 1, 2, 3), whole=True))
    assert not isinstance(config, str)
    assert config.model == model and config.topology == tp2  # no experts needed: one engine
    assert config.args[-2:] == ("--tensor-parallel-size", "2") and config.name == f"{VARIANT.name}/tp2"
    env = dict(config.env)
    # vLLM's CPU workers assert one bind entry per local worker; memory nodes are per DP rank.
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3" and recipes.MEMORY_NODES not in env
    assert recipes.topology_config(base, tp2, suite(), target(), Placement((1,))) == (
        "topology tp2 needs 2 CPU cores (one per worker); this process owns 1 (1)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert recipes.topology_config(base, tp2, suite(), target("cuda"), Placement()) == (
        "topology tp2 needs 2 GPUs (one per worker); 1 visible")
    second = Placement(worker=Worker("gw1", 1, 2))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert recipes.device_env(target("cuda"), suite(), second, tensor_parallel=2) == {
        "CUDA_VISIBLE_DEVICES": "6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_a_topology_the_run_cannot_serve_is_a_reason_not_a_config(tmp_path, monkeypatch):
    dp2 = topology_named("dp2")
    base = recipes.base_config(VARIANT, suite(), target(), "org/dense", FOUR)
    assert recipes.topology_config(base, dp2, suite(), target(), Placement((1,))) == (
        "topology dp2 needs 2 CPU cores (one per engine); this process owns 1 (1)")
    assert recipes.topology_config(base, dp2, suite(), target(), FOUR) == (
        "topology dp2: vLLM runs its DP engine class only for MoE models and 'org/dense' is not a local "
        "folder the suite can declare experts in; name an MoE model with --lifecycle-dp-model")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert recipes.topology_config(base, dp2, suite(), target("cuda"), Placement()) == (
        "topology dp2 needs 2 GPUs (one per engine); 1 visible")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2")  # two workers of two devices each need four
    assert recipes.topology_config(base, dp2, suite(dp_model="m"), target("cuda"),
                                   Placement(worker=Worker("gw0", 0, 2))) == (
        "topology dp2: -n 2 with 2 device(s) per worker needs 4 GPUs; 3 visible (0,1,2)")


def test_a_gpu_worker_takes_its_own_devices_one_per_rank(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    second = Placement(worker=Worker("gw1", 1, 2))
    assert recipes.device_env(target("cuda"), suite(), second, engines=2) == {
        "CUDA_VISIBLE_DEVICES": "6,7", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    base = recipes.base_config(VARIANT, suite(), target("cuda"), "m", second)
    assert recipes.devices_of(base, second) == {"cuda_visible_devices": ["5"]}
    assert recipes.device_env(target("cuda"), suite(), Placement(), engines=2) == {}
    assert recipes.devices_of(base, Placement()) is None  # a plain run's devices are all of them


def test_api2_starts_the_multi_api_entry_with_the_checkout_on_pythonpath(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    base = recipes.base_config(VARIANT, suite(python="/venv/bin/python"), target(), "m", FOUR)
    api2 = topology_named("api2")
    config = recipes.topology_config(base, api2, suite(python="/venv/bin/python"), target(), FOUR)
    assert not isinstance(config, str)
    assert config.entry == ("/venv/bin/python", "-m", "fixtures.in_target.multi_api_server")
    assert dict(config.env)["PYTHONPATH"] == os.pathsep.join((str(recipes.CHECKOUT), "/elsewhere"))
    assert (recipes.CHECKOUT / "fixtures" / "in_target" / "multi_api_server.py").is_file()
    assert config.args[-2:] == ("--api-server-count", "2") and config.model == "m"
    assert dict(config.env) == dict(base.env) | {"PYTHONPATH": dict(config.env)["PYTHONPATH"]}


def test_the_offline_config_starts_the_host_entry(tmp_path):
    engine = BY_NAME["AsyncLLM-MP0"]
    config = recipes.offline_config(VARIANT, suite(python="/venv/bin/python"), target(), "/m", engine, FOUR)
    env = dict(config.env)
    assert config.entry == ("/venv/bin/python", "-m", "fixtures.in_target.offline_host")
    assert (config.label, config.dev_mode) == ("offline-AsyncLLM-MP0", False)
    assert config.args == ("--api", "AsyncLLM", "--max-num-seqs", "1", "--enable-prefix-caching",
                           "--weight-transfer-config", '{"backend": "lifecycle_file"}',
                           "--max-model-len", "131072")
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["HF_HUB_OFFLINE"] == "1"
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(recipes.CHECKOUT)
    dp2 = recipes.offline_topology_config(config, topology_named("dp2"), suite(dp_model="org/moe"), target(),
                                          FOUR)
    assert not isinstance(dp2, str) and dp2.label == "offline-AsyncLLM-MP0-dp2" and dp2.model == "org/moe"
    assert dict(dp2.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"
    tp2 = recipes.offline_topology_config(config, topology_named("tp2"), suite(), target(), FOUR)
    assert not isinstance(tp2, str) and tp2.model == "/m" and tp2.label == "offline-AsyncLLM-MP0-tp2"
    assert tp2.args[-2:] == ("--tensor-parallel-size", "2") and "--data-parallel-size" not in tp2.args
    assert dict(tp2.env)["VLLM_CPU_OMP_THREADS_BIND"] == "0-1|2-3"
    with pytest.raises(ConfigError, match="topology api2 has several API servers; the Python API has none"):
        recipes.offline_topology_config(config, topology_named("api2"), suite(), target(), FOUR)


def test_an_external_target_and_a_checkpoints_golden_keep_the_configs_they_had():
    assert recipes.external_config(VARIANT, "org/m") == LaunchConfig(variant=VARIANT, model="org/m",
                                                                     served_model_name="org/m")
    base = recipes.base_config(VARIANT, suite(), target(), "/models/tiny", FOUR)
    assert recipes.checkpoint_config(base, Path("/ck/b"), "B") == replace(base, model="/ck/b",
                                                                          label="checkpoint-B")


def test_a_reproducer_server_is_its_scripts_flags_over_the_cpu_defaults_of_its_cores(tmp_path):
    model = Path(local_model(tmp_path))
    one = recipes.reproducer_config(VARIANT, model, target(), [0, 1, 2, 3], 1, ("--x",), {"A": "b"}, False)
    assert one == LaunchConfig(
        variant=VARIANT, model=str(model), served_model_name="lifecycle-model", label="reproducer",
        args=("--x",), env=(("A", "b"), ("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"),
                            ("VLLM_CPU_KVCACHE_SPACE", "1"), ("VLLM_CPU_OMP_THREADS_BIND", "0-2")),
        dev_mode=False)
    dp2 = recipes.reproducer_config(VARIANT, model, target(), [0, 1, 2, 3], 2, ("--x",),
                                    {"VLLM_SERVER_DEV_MODE": "1", "A": "b"}, True)
    assert dp2.args == ("--data-parallel-size", "2", "--x") and dp2.dev_mode and dp2.isolation > 0
    assert dp2.model == str(tmp_path / "tiny-moe-declared")
    assert dict(dp2.env) == dict(one.env) | {"VLLM_CPU_OMP_THREADS_BIND": "0-1|2-3"}
    assert recipes.reproducer_env(target("cuda"), 2, [0]) == {}
    with pytest.raises(ConfigError, match="2 data-parallel engines need 2 CPU cores; 1 available"):
        recipes.reproducer_config(VARIANT, model, target(), [0], 2, (), {}, False)


def test_the_embedded_model_is_found_in_the_cache_or_built_by_the_target_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cached = default_cache_dir() / TinyModelSpec().folder_name
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    assert recipes.ensured_model("no-such-python", spec=TinyModelSpec()) == cached  # nothing runs
    builder = tmp_path / "python"
    builder.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/asked\necho {tmp_path}/built\n')
    builder.chmod(0o755)
    built = recipes.ensured_model(str(builder), "--checkpoint", "b", spec=checkpoint_b_spec())
    assert built == tmp_path / "built"
    assert (tmp_path / "asked").read_text() == "-m fixtures.in_target.tiny_model --checkpoint b\n"
    builder.write_text("#!/bin/sh\necho boom >&2\nexit 3\n")
    asked = r"\(-m fixtures.in_target.tiny_model --lora-adapter\) failed:\nboom"
    with pytest.raises(HarnessError, match=f"building the embedded model {asked}"):
        recipes.ensured_model(str(builder), "--lora-adapter")
