"""External-target mode on a fake server: the probe, its one-line errors, and which tests apply."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fixtures.axes.variants import VARIANTS
from fixtures.errors import ConfigError
from fixtures.launching.config import build_config
from fixtures.launching.external import ExternalManager, needs_own_process, probe_external
from fixtures.launching.server import LaunchConfig, free_port
from selftests.conftest import fake_config

MRV1 = next(v for v in VARIANTS if v.name == "MRV1-eager")
MRV2 = next(v for v in VARIANTS if v.name == "MRV2-eager")


def test_probe_reads_version_runner_and_model(fake_manager):
    server = fake_manager.acquire(fake_config())
    facts = probe_external(server.url, MRV1)
    assert facts.model == "fake-model" and facts.v2_runner is False
    assert facts.target.vllm_version == "0.32.0" and facts.target.platform == "cpu"
    assert facts.target.torch_version == "2.13.0+cpu" and not facts.target.cuda_available
    assert facts.target.vllm_location is None  # the server's install location is not visible over HTTP


def test_probe_refuses_a_server_running_another_runner(fake_manager):
    server = fake_manager.acquire(fake_config(FAKE_RUNNER_V2="1"))
    with pytest.raises(ConfigError, match=r"declared MRV1-eager .* reports VLLM_USE_V2_MODEL_RUNNER=1"):
        probe_external(server.url, MRV1)
    assert probe_external(server.url, MRV2).v2_runner is True


def test_an_unreachable_url_is_one_line():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError) as err:
        probe_external(url, MRV1, timeout=2)
    assert str(err.value).startswith(f"--lifecycle-target-url: cannot reach {url}/health")
    assert "\n" not in str(err.value)


def test_only_the_default_config_applies_to_an_external_target():
    manager = ExternalManager("http://127.0.0.1:9")
    default = LaunchConfig(variant=MRV1, model="m", served_model_name="m")
    server = manager.acquire(default)
    assert server.url == "http://127.0.0.1:9" and server.proc is None and manager.current is server
    for other in (default.isolated(), dataclasses.replace(default, dev_mode=False, label="no-dev"),
                  default.with_args("--api-key", "k", label="api-key")):
        with pytest.raises(pytest.skip.Exception, match="not applicable to an external target"):
            manager.acquire(other)
    with pytest.raises(pytest.skip.Exception, match="inspects the server process"):
        needs_own_process(server)


@pytest.mark.parametrize(("options", "message"), [
    ({"--lifecycle-target-url": "localhost:8000"}, r"is not an http\(s\) URL"),
    ({"--lifecycle-target-url": "http://127.0.0.1:8000"}, "declare the server's variant"),
    ({"--lifecycle-target-url": "http://127.0.0.1:8000", "--lifecycle-variants": "MRV1-eager"},
     "declare the contract profile"),
])
def test_external_target_options_are_declared(options, message):
    with pytest.raises(ConfigError, match=message):
        build_config(options.get, {}, Path("/tmp/r"))
    good = {"--lifecycle-target-url": "http://127.0.0.1:8000/", "--lifecycle-variants": "MRV1-eager",
            "--lifecycle-profile": "0.32"}
    assert build_config(good.get, {}, Path("/tmp/r")).target_url == "http://127.0.0.1:8000"


def test_the_loopback_check_sees_a_wildcard_listener():
    """security/loopback-only can fail: a socket on 0.0.0.0 reads as 00000000, not 127.0.0.1."""
    import importlib.util
    import socket

    spec = importlib.util.spec_from_file_location(
        "loopback_check", Path(__file__).resolve().parent.parent / "conformance/security/test_loopback.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp here")
    for host, expected in (("0.0.0.0", "00000000"), ("127.0.0.1", module.LOOPBACK4)):
        with socket.socket() as sock:
            sock.bind((host, 0))
            sock.listen()
            assert module.listening_addresses(sock.getsockname()[1]) == [expected]


def test_triton_is_read_from_the_target_never_assumed(fake_manager):
    # Issue 22, hole 5: an external target was taken to have no Triton, so MRV2 was skipped on a
    # constant. Unknown now skips nothing; a server running MRV2 has Triton.
    from fixtures.launching.external import _triton
    from fixtures.launching.target import variant_skip_reason

    v1 = probe_external(fake_manager.acquire(fake_config()).url, MRV1).target
    assert v1.has_triton is None
    assert variant_skip_reason(MRV2, v1) is None
    assert variant_skip_reason(MRV2, dataclasses.replace(v1, has_triton=False)) is not None
    assert _triton({"system_env": {"has_triton": "False"}}, None) is False
    assert _triton({}, True) is True
