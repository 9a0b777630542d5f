"""The exploration on a server that dies under it (hole 13 of the honesty issue): the run ends
with the calls that led to the death, not with what Hypothesis made of the sequences after it
(FlakyStrategyDefinition, or a shrunk sequence that only met a dead server)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from conformance.exploration import test_reference_model as exploration
from fixtures.errors import ServerDiedError
from fixtures.observing.client import Generation


@dataclass
class DyingServer:
    """Alive until `lives` control calls were sent; the next one kills it."""

    lives: int
    url: str = "http://127.0.0.1:9"
    facts: dict[str, Any] = field(default_factory=dict)
    config: Any = field(default_factory=lambda: SimpleNamespace(served_model_name="m"))
    up: bool = True

    def alive(self) -> bool:
        return self.up

    def ensure_alive(self) -> None:
        if not self.up:
            raise ServerDiedError("the stand-in server exited")


class DyingControl:
    """Every call is a POST /<name>; idle reads answer like an awake engine."""

    def __init__(self, server: DyingServer) -> None:
        self.server = server
        self.last_sent: tuple[str, str] | None = None

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.last_sent = ("POST", f"/{name}")
            if self.server.lives <= 0:
                self.server.up = False
                raise ServerDiedError(f"POST /{name}: cannot connect to a live server")
            self.server.lives -= 1
            raise AssertionError("the stand-in answers nothing: it only dies")
        return call


class Gen:
    def start(self, prompt: str, max_tokens: int, **kwargs: Any) -> Generation:
        gen = Generation(stream=False, max_tokens=max_tokens, error=ServerDiedError("gone"))
        gen.done.set()
        return gen

    def join_all(self, timeout: float) -> None:
        return None


def engine(lives: int, baselines: int = 10**6) -> Any:
    """A stand-in whose control plane dies after `lives` calls, and whose server exits at the
    return to baseline after `baselines` of them."""
    server = DyingServer(lives)
    left = [baselines]

    def to_baseline() -> None:
        if left[0] <= 0:
            server.up = False
            raise ServerDiedError("GET /is_sleeping: cannot connect to a live server")
        left[0] -= 1

    return SimpleNamespace(server=server, control=DyingControl(server), gen=Gen(), profile="0.32",
                           request_timeout=1.0, to_baseline=to_baseline, lock=threading.Lock(),
                           in_flight_tokens=lambda seconds: 900, decode_rate=lambda: 300.0)


BUDGET = settings(max_examples=5, stateful_step_count=3, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))


def test_a_death_is_reported_with_the_call_that_met_it() -> None:
    machine = exploration.build_machine(engine(lives=0), findings=[], stats={"sequences": 0, "steps": 0})
    with pytest.raises(ServerDiedError) as died:
        exploration.run_machine(machine, BUDGET)
    message = str(died.value)
    assert message.startswith("the server died while exploring; the calls that led there:")
    assert "# reproduction" in message
    assert "  # the last call sent before the server died" in message
    assert len(machine.died) == 1  # the first death's calls, not a later sequence's


def test_a_discrepancy_on_a_live_server_is_not_called_a_death() -> None:
    # The stand-in answers every call with an assertion and never dies: Hypothesis' own failure.
    machine = exploration.build_machine(engine(lives=10**6), findings=[],
                                        stats={"sequences": 0, "steps": 0})
    with pytest.raises(AssertionError) as failed:
        exploration.run_machine(machine, BUDGET)
    assert not isinstance(failed.value, ServerDiedError) and machine.died == []


def test_a_death_met_by_the_next_sequence_is_told_with_the_calls_before_it() -> None:
    # The first sequence fails on a live server (the stand-in answers with an assertion), and
    # the server is gone when the next sequence returns to baseline: the calls reported are
    # the first sequence's, the last of them the call sent before the death.
    machine = exploration.build_machine(engine(lives=10**6, baselines=2), findings=[],
                                        stats={"sequences": 0, "steps": 0})
    with pytest.raises(ServerDiedError) as died:
        exploration.run_machine(machine, BUDGET)
    assert str(died.value).startswith("the server died while exploring; the calls that led there:")
    assert "curl -s -X POST 'http://127.0.0.1:9/" in str(died.value)


def _resume_allowed(machine: Any, asleep: frozenset[str]) -> bool:
    """Whether the machine's resume rule may be drawn in a state with these tags asleep."""
    from hypothesis.stateful import RULE_MARKER

    rule = getattr(machine.resume, RULE_MARKER)
    holder = SimpleNamespace(state=SimpleNamespace(asleep=asleep))
    return all(p(holder) for p in rule.preconditions)


def test_the_dp_exploration_resumes_asleep_engines_only_outside_the_finding() -> None:
    """Stock vLLM's DP engine core dies when /resume unpauses asleep engines (a rank waits in
    its forward for one that skips it): inside that finding's scope the DP exploration does not
    draw it; on one engine, or where the finding does not apply, it does."""
    stats = {"sequences": 0, "steps": 0}
    asleep, awake = frozenset({"weights", "kv_cache"}), frozenset()
    dp_known = exploration.build_machine(engine(lives=0), [], stats, lambda b: True, engines=2)
    assert not _resume_allowed(dp_known, asleep) and _resume_allowed(dp_known, awake)
    one = exploration.build_machine(engine(lives=0), [], stats, lambda b: True, engines=1)
    assert _resume_allowed(one, asleep)
    dp_fixed = exploration.build_machine(engine(lives=0), [], stats, lambda b: False, engines=2)
    assert _resume_allowed(dp_fixed, asleep)
    from fixtures.judging import reference_model as model

    only_safety = lambda b: b == "safety/no-request-while-asleep"  # noqa: E731
    assert model.kills_data_parallel(2, only_safety) == "safety/no-request-while-asleep"
    assert model.kills_data_parallel(1, only_safety) is None
    assert model.kills_data_parallel(2, lambda b: b == "flags/partial-wake") is None
    note = exploration.RESUME_ASLEEP_NOTE.format(engines=2, finding="safety/no-request-while-asleep")
    assert "finding of safety/no-request-while-asleep" in note
