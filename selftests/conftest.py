"""Fixtures for the suite's own tests: no vLLM, no model, no network beyond loopback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fixtures.server import LaunchConfig, ServerManager
from fixtures.variants import VARIANTS

FAKE_SERVER = Path(__file__).with_name("fake_server.py")


@pytest.fixture
def fake_manager(tmp_path: Path):
    mgr = ServerManager(launcher=(sys.executable, str(FAKE_SERVER)), log_dir=tmp_path,
                        start_timeout=60, stop_grace=2)
    yield mgr
    mgr.release()


def fake_config(label: str = "shared", **env: str) -> LaunchConfig:
    config = LaunchConfig(variant=VARIANTS[0], model="fake", served_model_name="fake", label=label,
                          dev_mode=False)
    return config.with_env(**env) if env else config
