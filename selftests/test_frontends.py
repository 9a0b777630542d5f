"""Pinning a call to one API server of several: the front-ends race to accept, and a starved
one can lose hundreds of races in a row before it gets its turn."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from fixtures.errors import HarnessError
from fixtures.observing import frontends
from fixtures.observing.api_shape import ApiShape


class _Conn:
    def __init__(self) -> None:
        self.sock = None
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _server(api_servers: int = 2):
    return SimpleNamespace(ensure_alive=lambda: None,
                           config=SimpleNamespace(topology=SimpleNamespace(api_servers=api_servers)))


@pytest.fixture
def owners(monkeypatch):
    """Feed _connect the owners of successive connections; no pauses."""
    monkeypatch.setattr(frontends, "PIN_PAUSE_S", 0.0)

    def feed(sequence):
        it = iter(sequence)
        monkeypatch.setattr(frontends, "_connect", lambda server, timeout=30.0: (_Conn(), next(it)))

    return feed


def test_a_front_end_that_loses_300_races_is_still_reached_on_an_extended_wait(owners):
    owners(itertools.chain([11] * 300, [22]))
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape())
    conn = front._pinned()
    assert not conn.closed
    [chance] = front.chances
    assert chance.kind == "extended" and "accepted a connection only after 301 tries" in chance.reason


def test_a_front_end_reached_within_a_fair_race_takes_no_second_chance(owners):
    owners(itertools.chain([11] * (frontends.PIN_FAIR_CONNECTIONS - 1), [22]))
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape())
    front._pinned()
    assert front.chances == []


def test_a_front_end_that_never_accepts_is_a_harness_error_at_the_deadline(owners, monkeypatch):
    monkeypatch.setattr(frontends, "PIN_TIMEOUT_S", 0.05)
    owners(itertools.repeat(11))
    with pytest.raises(HarnessError, match=r"no connection to API server pid 22 in \d+ attempts over"):
        frontends.Frontend(_server(), 22, 5.0, ApiShape())._pinned()


def test_the_api_server_probe_waits_for_a_starved_front_end(owners):
    owners(itertools.chain([11] * 250, [22], itertools.repeat(11)))
    assert frontends.api_server_pids(_server(2)) == [11, 22]


def test_the_api_server_probe_takes_its_minimum_even_when_all_are_seen(owners):
    calls = itertools.count()
    owners(11 if next(calls) % 2 else 22 for _ in itertools.count())
    assert frontends.api_server_pids(_server(2)) == [11, 22]
    assert next(calls) >= frontends.MIN_PROBES
