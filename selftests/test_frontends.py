"""Pinning a call to one API server of several: the other front-ends are stopped while its
connection is accepted, and always continued, whatever the connection did."""

from __future__ import annotations

import signal
from types import SimpleNamespace

import pytest

from fixtures.errors import HarnessError
from fixtures.observing import frontends
from fixtures.observing.api_shape import ApiShape


class _Conn:
    def __init__(self) -> None:
        self.sock = None
        self.closed = False
        self.timeout = 0.0

    def close(self) -> None:
        self.closed = True


def _server(api_servers: int = 2, members: tuple[int, ...] = (11, 22, 33)):
    return SimpleNamespace(ensure_alive=lambda: None, proc=SimpleNamespace(pid=1),
                           config=SimpleNamespace(topology=SimpleNamespace(api_servers=api_servers)),
                           members=members)


@pytest.fixture
def engine(monkeypatch):
    """A fake group: `accepting` are the front-ends; a connection goes to the first of them not
    stopped (the kernel's favourite), or times out when all are stopped."""
    signals: list[tuple[int, int]] = []
    state = SimpleNamespace(signals=signals, accepting=[11, 22], stopped=set(), fail=None)

    def kill(pid, sig):
        signals.append((pid, sig))
        (state.stopped.add if sig == signal.SIGSTOP else state.stopped.discard)(pid)

    def connect(server, timeout):
        if state.fail:
            raise state.fail
        free = [p for p in state.accepting if p not in state.stopped]
        if not free:
            raise TimeoutError("timed out")
        return _Conn(), free[0]

    monkeypatch.setattr(frontends.os, "kill", kill)
    monkeypatch.setattr(frontends, "group_members", lambda pgid: [1, 11, 22, 33])
    monkeypatch.setattr(frontends, "_connect", connect)
    return state


def test_a_call_reaches_the_front_end_the_kernel_does_not_favour(engine):
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11,))
    front._pinned()
    assert engine.signals == [(11, signal.SIGSTOP), (11, signal.SIGCONT)]
    assert engine.stopped == set()


def test_the_others_are_continued_when_the_connection_fails(engine):
    engine.fail = ConnectionResetError("reset")
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11,))
    with pytest.raises(ConnectionResetError):
        front._pinned()
    assert engine.stopped == set() and engine.signals[-1] == (11, signal.SIGCONT)


def test_a_front_end_that_does_not_answer_alone_is_the_engines_failure(engine):
    engine.accepting = [11]  # pid 22 never accepts
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11,))
    with pytest.raises(AssertionError, match="API server pid 22 did not answer /health"):
        front._pinned()
    assert engine.stopped == set()


def test_a_connection_taken_by_another_process_is_a_harness_error(engine):
    engine.accepting = [33, 22]  # a third acceptor the harness did not know of
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11,))
    with pytest.raises(HarnessError, match="accepted by pid 33, not by API server pid 22"):
        front._pinned()


def test_only_processes_of_the_servers_group_are_signalled(engine):
    front = frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11, 4242))
    front._pinned()
    assert {pid for pid, _ in engine.signals} == {11}


def test_the_probe_finds_each_front_end_with_the_ones_found_stopped(engine):
    assert frontends.api_server_pids(_server(2)) == [11, 22]
    assert engine.stopped == set()


def test_the_probe_stops_at_a_promised_front_end_that_never_accepts(engine):
    engine.accepting = [11]
    assert frontends.api_server_pids(_server(2)) == [11]


def test_two_threads_pinning_to_different_front_ends_each_reach_their_own(engine, monkeypatch):
    import threading
    import time

    def slow_connect(server, timeout):
        free = [p for p in engine.accepting if p not in engine.stopped]
        time.sleep(0.05)  # the window in which another thread's stop would interleave
        return _Conn(), free[0]

    monkeypatch.setattr(frontends, "_connect", slow_connect)
    fronts = [frontends.Frontend(_server(), 11, 5.0, ApiShape(), others=(22,)),
              frontends.Frontend(_server(), 22, 5.0, ApiShape(), others=(11,))]
    errors: list[BaseException] = []

    def pin(front):
        try:
            front._pinned()
        except BaseException as exc:  # judged below
            errors.append(exc)

    threads = [threading.Thread(target=pin, args=(f,)) for f in fronts for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and engine.stopped == set()
