"""Fixtures of the weights/ family: the two checkpoints, their golden outputs, and a weight
client whose teardown puts checkpoint A back, so the tests after a sync meet the model the
rest of the suite expects."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems
from fixtures.launching.server import LaunchConfig, ServerManager
from fixtures.launching.target import TargetInfo
from fixtures.launching.tiny_model import checkpoint_b_spec, default_cache_dir
from fixtures.observing.engine import Engine
from fixtures.observing.offline import OfflineClient
from fixtures.observing.weight_sync import Checkpoint, OfflineWeights, WeightClient, outputs
from fixtures.plugin.items import ROOT
from fixtures.plugin.state import RunState

RESTORE_VERSION = "checkpoint-A"


@pytest.fixture(scope="session")
def checkpoints(run_state: RunState, model_path: str) -> dict[str, Checkpoint]:
    """A (the served model) and B (same architecture, other weights), built by the target's
    interpreter like the model itself."""
    if run_state.external is not None or run_state.config.model != "embedded":
        pytest.skip("weights/: the suite pushes checkpoint B of its embedded model; another model "
                    "has no second checkpoint the suite can build (serve the embedded model)")
    expected = default_cache_dir() / f"tiny-llama-{checkpoint_b_spec().digest()}"
    if not (expected / "config.json").is_file():
        builder = [run_state.config.python, "-m", "fixtures.launching.tiny_model", "--checkpoint", "b"]
        proc = subprocess.run(builder, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
        if proc.returncode != 0:
            raise HarnessError(f"building checkpoint B failed:\n{proc.stderr[-2000:]}")
    return {"A": Checkpoint("A", Path(model_path)), "B": Checkpoint("B", expected)}


def _cache_key(config: LaunchConfig, target: TargetInfo, checkpoint: Checkpoint) -> str:
    spec = json.loads((checkpoint.folder / "tiny_model_spec.json").read_text())
    blob = json.dumps({"vllm": target.vllm_version, "platform": target.platform,
                       "variant": config.variant.name, "args": config.args, "spec": spec,
                       "prompt": golden.HTTP_PROMPT, "tokens": golden.TOKENS}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _golden_of(manager: Any, config: LaunchConfig, run_state: RunState, target: TargetInfo,
               checkpoint: Checkpoint) -> list[int]:
    """Greedy output of an engine started on the checkpoint (not synced to it): what "the
    checkpoint landed" means. Cached on disk per vLLM, platform, variant and checkpoint, since
    it costs a server start."""
    key = _cache_key(config, target, checkpoint)
    path = default_cache_dir().parent / "goldens" / f"{checkpoint.label}-{key}.json"
    if path.is_file():
        return list(json.loads(path.read_text())["token_ids"])
    server = manager.acquire(replace(config, model=str(checkpoint.folder),
                                     label=f"checkpoint-{checkpoint.label}"))
    engine = Engine.attach(server, server.config.variant, run_state.profile, target.platform,
                           run_state.config.request_timeout)
    tokens = list(golden.capture_http(engine.gen, server.ensure_alive).token_ids)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"token_ids": tokens, "captured_on": server.config.name}))
    return tokens


@pytest.fixture(scope="session")
def goldens(manager: Any, base_config: LaunchConfig, run_state: RunState, target: TargetInfo,
            checkpoints: dict[str, Checkpoint]) -> dict[str, list[int]]:
    """Label -> the golden prompt's greedy token ids on an engine started on that checkpoint."""
    if not isinstance(manager, ServerManager):
        pytest.skip("weights/: the suite starts an engine on each checkpoint for its golden output")
    found = {label: _golden_of(manager, base_config, run_state, target, ckpt)
             for label, ckpt in checkpoints.items()}
    if found["A"] == found["B"]:
        raise HarnessError("checkpoints A and B give the same golden output: B cannot be told apart")
    return found


def _golden_outputs(engine: Engine, engines: int) -> dict[str, list[int]]:
    return outputs(engine, engines, golden.HTTP_PROMPT, golden.TOKENS)


def _restore(engine: Engine, client: WeightClient, checkpoints: dict[str, Checkpoint],
             goldens: dict[str, list[int]], engines: int) -> None:
    engine.to_baseline()
    if serves_problems(_golden_outputs(engine, engines), "A", goldens, "restore") == []:
        return
    client.sync(checkpoints["A"], RESTORE_VERSION, engines)
    problems = serves_problems(_golden_outputs(engine, engines), "A", goldens, "after restoring checkpoint A")
    if problems:
        raise HarnessError("; ".join(problems))


def _stop_unrestored(server: Any, exc: BaseException, run_state: RunState,
                     request: pytest.FixtureRequest) -> None:
    """A server left on other weights would corrupt every later test: stop it (the next test
    gets a fresh one) and say so in this test's notes."""
    manager = run_state.manager
    if isinstance(manager, ServerManager) and manager.current is server:
        manager.release()
    run_state.items.get(request.node.nodeid, {}).setdefault("notes", []).append(
        f"checkpoint A could not be restored ({str(exc)[:200]}); its server was stopped")


def _weight_client(engine: Engine, engines: int, checkpoints: dict[str, Checkpoint],
                   goldens: dict[str, list[int]], run_state: RunState,
                   request: pytest.FixtureRequest) -> Iterator[WeightClient]:
    client = WeightClient(engine.control, engine.server.facts, run_state.config.weight_sync)
    problems = serves_problems(_golden_outputs(engine, engines), "A", goldens, "before the test")
    if problems:
        raise HarnessError("the engine does not serve checkpoint A at the start: " + "; ".join(problems))
    yield client
    if not engine.server.alive():
        return
    try:
        _restore(engine, client, checkpoints, goldens, engines)
    except (AssertionError, HarnessError) as exc:
        _stop_unrestored(engine.server, exc, run_state, request)


@pytest.fixture
def weights(engine: Engine, checkpoints: dict[str, Checkpoint], goldens: dict[str, list[int]],
            run_state: RunState, request: pytest.FixtureRequest) -> Iterator[WeightClient]:
    """The shared server's weight client, on checkpoint A before and after the test."""
    yield from _weight_client(engine, 1, checkpoints, goldens, run_state, request)


@pytest.fixture
def topology_weights(topology_engine: Engine, topology: Any, checkpoints: dict[str, Checkpoint],
                     goldens: dict[str, list[int]], run_state: RunState,
                     request: pytest.FixtureRequest) -> Iterator[WeightClient]:
    """The topology server's weight client, every engine on checkpoint A before and after."""
    yield from _weight_client(topology_engine, topology.engines, checkpoints, goldens, run_state, request)


def _offline_weights(offline: OfflineClient, engines: int, checkpoints: dict[str, Checkpoint],
                     run_state: RunState, request: pytest.FixtureRequest) -> Iterator[OfflineWeights]:
    weights = OfflineWeights(offline)
    yield weights
    if not offline.server.alive():
        return
    try:
        offline.baseline()
        weights.push(checkpoints["A"], RESTORE_VERSION, engines)
    except (AssertionError, HarnessError) as exc:
        _stop_unrestored(offline.server, exc, run_state, request)


@pytest.fixture
def offline_weights(offline: OfflineClient, checkpoints: dict[str, Checkpoint],
                    goldens: dict[str, list[int]], run_state: RunState,
                    request: pytest.FixtureRequest) -> Iterator[OfflineWeights]:
    """The offline engine's weight methods; checkpoint A put back after the test."""
    yield from _offline_weights(offline, 1, checkpoints, run_state, request)


@pytest.fixture
def topology_offline_weights(topology_offline: OfflineClient, topology: Any,
                             checkpoints: dict[str, Checkpoint], goldens: dict[str, list[int]],
                             run_state: RunState, request: pytest.FixtureRequest) -> Iterator[OfflineWeights]:
    """The multi-engine offline host's weight methods; A put back on every engine after."""
    yield from _offline_weights(topology_offline, topology.engines, checkpoints, run_state, request)
