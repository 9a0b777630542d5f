"""Typed configuration: precedence and one clear error per bad value."""

from __future__ import annotations

from pathlib import Path

import pytest

from fixtures.config import build_config, resolve_profile
from fixtures.errors import ConfigError


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


@pytest.mark.parametrize(("version", "profile"),
                         [("0.32.0", "0.32"), ("0.32.1+cpu", "0.32"), ("0.33.0", "0.33"),
                          ("0.34.0rc1", "0.33"), ("1.0.0", "0.33")])
def test_profile_follows_the_target_release(version, profile):
    assert resolve_profile("auto", version) == profile


def test_explicit_profile_wins_and_unparsable_version_is_an_error():
    assert resolve_profile("layered", "0.32.0") == "layered"
    with pytest.raises(ConfigError, match="set --lifecycle-profile"):
        resolve_profile("auto", "main-dev")


def test_fault_selection_and_soak_options():
    config = make({"--lifecycle-fault": "keep-aborts",
                   "--lifecycle-behaviours": "custody/, flags/awake-baseline",
                   "--lifecycle-layer": "contract", "--lifecycle-repeat": "3"})
    assert config.fault == "keep-aborts" and config.repeat == 3 and config.layer == "contract"
    assert config.behaviours == ("custody/", "flags/awake-baseline")
    assert make().fault is None and make().repeat == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"--lifecycle-fault": "typo"}, "--lifecycle-fault: unknown fault 'typo'"),
        ({"--lifecycle-layer": "both"}, "--lifecycle-layer: 'both' is not one of contract, mechanism"),
        ({"--lifecycle-repeat": "0"}, "--lifecycle-repeat: must be positive"),
    ],
)
def test_bad_detection_options_name_the_option(options, message):
    with pytest.raises(ConfigError) as err:
        make(options)
    assert message in str(err.value)
