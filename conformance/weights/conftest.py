"""Fixtures of the weights/ family: a weight client whose teardown puts checkpoint A back, so
the tests after a sync meet the model the rest of the suite expects (the two checkpoints and
their golden outputs are fixtures/plugin/checkpoints.py, shared with the exploration)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems
from fixtures.launching.environments import WORKER_EXTENSION
from fixtures.launching.server import ServerManager
from fixtures.observing.engine import Engine
from fixtures.observing.offline import OfflineClient
from fixtures.observing.weight_sync import Checkpoint, OfflineWeights, WeightClient, outputs
from fixtures.plugin.state import RunState
from fixtures.protocol.parts import Lifecycle
from fixtures.protocol.weights import HttpWeights, PythonApiWeights, WeightsPart
from fixtures.spec.profiles import PROFILES

RESTORE_VERSION = "checkpoint-A"


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
    run_state.add_notes(
        request.node.nodeid, f"checkpoint A could not be restored ({str(exc)[:200]}); its server was stopped")


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
                     topology_goldens: dict[str, list[int]], run_state: RunState,
                     request: pytest.FixtureRequest) -> Iterator[WeightClient]:
    """The topology server's weight client, every engine on checkpoint A before and after (as
    the topology serves A: fixtures/plugin/checkpoints.py topology_goldens)."""
    yield from _weight_client(topology_engine, topology.engines, checkpoints, topology_goldens,
                              run_state, request)


def _offline_weights(offline: OfflineClient, engines: int, checkpoints: dict[str, Checkpoint],
                     run_state: RunState, request: pytest.FixtureRequest) -> Iterator[OfflineWeights]:
    weights = OfflineWeights(offline)
    yield weights
    if not offline.server.alive():
        return
    try:
        offline.to_baseline()
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


@pytest.fixture
def weight_sync(lifecycle: Lifecycle, run_state: RunState, request: pytest.FixtureRequest) -> WeightsPart:
    """The weights part (fixtures/protocol/weights.py) over the test's transport, every engine
    on checkpoint A before and after the test (the fixtures above)."""
    spread = "topology" in request.fixturenames
    if lifecycle.transport == "http":
        engine = request.getfixturevalue("topology_engine" if spread else "engine")
        client = request.getfixturevalue("topology_weights" if spread else "weights")
        return HttpWeights(engine, client, run_state.config.python,
                           WORKER_EXTENSION in engine.server.config.args, golden.HTTP_PROMPT, golden.TOKENS,
                           PROFILES[engine.profile].sleep_requires_pause,
                           request.getfixturevalue("topology").workers if spread else 1)
    offline = request.getfixturevalue("topology_offline" if spread else "offline")
    weights = request.getfixturevalue("topology_offline_weights" if spread else "offline_weights")
    return PythonApiWeights(offline, weights, golden.HTTP_PROMPT, golden.TOKENS)
