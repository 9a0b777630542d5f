"""Typed configuration: precedence and one clear error per bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.errors import ConfigError
from fixtures.launching.config import build_config


def make(options=None, env=None):
    options = options or {}
    return build_config(options.get, env or {}, Path("/tmp/suite-root"))


def test_defaults():
    config = make()
    assert config.model == "embedded" and config.profile == "auto"
    assert len(config.variants) == 3 and config.start_timeout == 600
    assert config.report_dir.parent == Path("/tmp/suite-root/reports")


def test_option_beats_environment():
    config = make({"--lifecycle-model": "opt-model"}, {"VLLM_TEST_MODEL": "env-model"})
    assert config.model == "opt-model" and "--lifecycle-model" in config.explicit
    assert make(env={"VLLM_TEST_MODEL": "env-model"}).model == "env-model"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--lifecycle-variants": "MRV9"}, "--lifecycle-variants: unknown variant 'MRV9'"),
        ({"--lifecycle-profile": "0.99"}, "--lifecycle-profile: unknown profile '0.99'"),
        ({"--lifecycle-start-timeout": "soon"}, "--lifecycle-start-timeout: 'soon' is not a number"),
        ({"--lifecycle-request-timeout": "-5"}, "--lifecycle-request-timeout: must be positive"),
        ({"--lifecycle-max-model-len": "x"}, "--lifecycle-max-model-len: 'x' is not a number"),
    ],
)
def test_bad_values_name_the_option(options, message):
    with pytest.raises(ConfigError) as err:
        make(options)
    assert message in str(err.value)


def test_certify_scope_defaults_by_target_and_refuses_full_for_a_url():
    assert make().certify_scope == "full"
    external = {"--lifecycle-target-url": "http://127.0.0.1:8000", "--lifecycle-variants": "MRV1-eager",
                "--lifecycle-profile": "0.32"}
    assert make(external).certify_scope == "server"
    assert make({"--lifecycle-certify-scope": "server"}).certify_scope == "server"
    assert make(env={"VLLM_LIFECYCLE_CERTIFY_SCOPE": "server"}).certify_scope == "server"
    with pytest.raises(ConfigError) as err:
        make(external | {"--lifecycle-certify-scope": "full"})
    assert str(err.value).startswith("--lifecycle-certify-scope: full needs the Python API")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="--lifecycle-certify-scope: 'all' is not one of server, full"):
        make({"--lifecycle-certify-scope": "all"})
    # certified mode accepts an external target's declared variant (it declares, it does not select)
    certified = make(external | {"--lifecycle-certify": True})
    assert certified.certify and certified.certify_scope == "server"


def test_fault_selection_and_soak_options():
    config = make({"--lifecycle-fault": "keep-aborts",
                   "--lifecycle-behaviours": "custody/, flags/awake-baseline",
                   "--lifecycle-layer": "contract", "--lifecycle-repeat": "3"})
    assert config.fault == "keep-aborts" and config.repeat == 3 and config.layer == "contract"
    assert make({"--lifecycle-fault": "weights-checker-blind,weights-update-counted-twice"}).fault == (
        "weights-checker-blind,weights-update-counted-twice")
    assert config.behaviours == ("custody/", "flags/awake-baseline")
    assert make().fault is None and make().repeat == 1
    assert config.topology_repeat == 3  # follows --lifecycle-repeat unless given
    fewer = make({"--lifecycle-repeat": "2", "--lifecycle-topology-repeat": "1"})
    assert fewer.repeat == 2 and fewer.topology_repeat == 1
    assert make({"--lifecycle-explore-examples": "7"}).topology_explore_examples == 2
    assert make({"--lifecycle-topology-explore-examples": "5"}).topology_explore_examples == 5


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--lifecycle-fault": "typo"}, "--lifecycle-fault: unknown fault 'typo'"),
        ({"--lifecycle-fault": "keep-aborts,typo"}, "--lifecycle-fault: unknown fault 'typo'"),
        ({"--lifecycle-fault": "keep-aborts,weights-keep-pause-stale-kv"},
         "--lifecycle-fault: faults 'keep-aborts' and 'weights-keep-pause-stale-kv' both patch "
         "vllm.v1.engine.core:EngineCoreProc.pause_scheduler"),
        ({"--lifecycle-layer": "both"}, "--lifecycle-layer: 'both' is not one of contract, mechanism"),
        ({"--lifecycle-repeat": "0"}, "--lifecycle-repeat: must be positive"),
        ({"--lifecycle-topology-repeat": "two"}, "--lifecycle-topology-repeat: 'two' is not a number"),
        ({"--lifecycle-topology-explore-examples": "0"},
         "--lifecycle-topology-explore-examples: must be positive"),
    ],
)
def test_bad_detection_options_name_the_option(options, message):
    with pytest.raises(ConfigError) as err:
        make(options)
    assert message in str(err.value)


def test_cpu_cores_parse_lists_and_ranges_within_the_allowed_cores():
    def cores(raw):
        return build_config({"--lifecycle-cpu-cores": raw}.get, {}, Path("/tmp/r"),
                            allowed_cores=[0, 1, 2, 3]).cpu_cores

    assert cores("1") == (1,) and cores("0-2") == (0, 1, 2) and cores("3,0") == (0, 3)
    assert build_config({}.get, {}, Path("/tmp/r"), allowed_cores=[0, 1]).cpu_cores == ()
    env = build_config({}.get, {"VLLM_LIFECYCLE_CPU_CORES": "1"}, Path("/tmp/r"), allowed_cores=[0, 1])
    assert env.cpu_cores == (1,)


@pytest.mark.parametrize(("raw", "message"), [
    ("one", "--lifecycle-cpu-cores: 'one' is not a core list"),
    ("2-1", "--lifecycle-cpu-cores: '2-1' in '2-1' is not a core or an ascending range"),
    ("5", "--lifecycle-cpu-cores: core(s) [5] are not among the cores this process may run on (0, 1)"),
])
def test_bad_cpu_cores_name_the_option_and_the_value(raw, message):
    with pytest.raises(ConfigError) as info:
        build_config({"--lifecycle-cpu-cores": raw}.get, {}, Path("/tmp/r"), allowed_cores=[0, 1])
    assert str(info.value).startswith(message)

