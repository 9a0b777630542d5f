"""How a server starts: `vllm serve` through the CLI module, the deprecated module entry only
where the target's CLI cannot serve, and the log header that says which one ran and why."""

from __future__ import annotations

import dataclasses
import json

from fixtures.launching.server import CLI_MODULE, LEGACY_MODULE, Launcher, serve_launcher
from fixtures.launching.target import _MARK, parse_probe_output
from selftests.conftest import CPU_PROBE, fake_config


def test_the_cli_serves_with_the_model_as_its_positional_argument():
    launcher = serve_launcher("py", None)
    assert launcher.argv == ("py", "-m", CLI_MODULE, "serve")
    cmd = fake_config().command(launcher, 8000)
    assert cmd[:5] == ["py", "-m", CLI_MODULE, "serve", "fake"]
    assert "--model" not in cmd and "--served-model-name" in cmd


def test_the_module_entry_only_where_the_cli_cannot_serve_and_it_says_why():
    refusal = "PackageNotFoundError: No package metadata was found for vllm"
    launcher = serve_launcher("py", refusal)
    assert launcher.argv == ("py", "-m", LEGACY_MODULE) and not launcher.model_positional
    assert refusal in launcher.why and CLI_MODULE in launcher.why
    cmd = fake_config().command(launcher, 8000)
    assert cmd[3:5] == ["--model", "fake"]


def test_a_config_with_its_own_entry_keeps_it_and_takes_model_as_an_option():
    config = dataclasses.replace(fake_config(), entry=("py", "-m", "some.host"))
    cmd = config.command(serve_launcher("py", None), 8000)
    assert cmd[:5] == ["py", "-m", "some.host", "--model", "fake"]
    assert config.launcher_for(Launcher(("x",))).why == "this config's own entry"


def test_the_probe_says_whether_the_cli_can_serve():
    def probe(**extra: object) -> str:
        return _MARK + json.dumps(CPU_PROBE | extra)
    assert parse_probe_output("py", probe(serve_cli_refusal=None)).serve_cli_refusal is None
    refused = parse_probe_output("py", probe(serve_cli_refusal="PackageNotFoundError: vllm"))
    assert refused.serve_cli_refusal == "PackageNotFoundError: vllm"
    assert parse_probe_output("py", probe()).serve_cli_refusal == "not probed"  # the module entry then


def test_the_server_log_names_the_launcher(fake_manager):
    server = fake_manager.acquire(fake_config())
    header = server.log_path.read_text().splitlines()[:3]
    assert header[0] == f"# {server.config.name}"
    assert header[1].startswith("# launcher: ") and header[1].endswith("(given)")
