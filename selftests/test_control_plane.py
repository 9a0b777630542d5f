"""The control-plane client against a socket server that drops a request unanswered, the way a
server drops a keep-alive connection it closed a moment before: a read is tried once more, a
lifecycle call never is."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from fixtures.errors import ServerDiedError
from fixtures.observing.api_shape import ApiShape
from fixtures.observing.client import ControlPlane
from fixtures.observing.engine import TrackedControlPlane

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\": true}"


class DroppingServer:
    """Drops the first request of each method unanswered, answers the rest, never answers
    /hang; records the method of every request."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.seen: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                method, path = conn.recv(65536).decode().split(" ")[:2]
                first = method not in self.seen
                self.seen.append(method)
                if path == "/hang":
                    time.sleep(1.0)  # no answer while the client waits
                elif not first:
                    conn.sendall(OK)


@pytest.fixture
def server() -> Iterator[DroppingServer]:
    found = DroppingServer()
    yield found
    found.sock.close()


def test_a_dropped_read_is_tried_once_more(server):
    control = ControlPlane(server.url, 5, lambda: None, ApiShape())
    assert control.call("GET", "/is_paused").status == 200
    assert server.seen == ["GET", "GET"]


def test_a_dropped_lifecycle_call_is_never_sent_twice(server):
    control = ControlPlane(server.url, 5, lambda: None, ApiShape())
    with pytest.raises(ServerDiedError, match="POST /pause: cannot connect to a live server"):
        control.call("POST", "/pause")
    assert server.seen == ["POST"]


def test_a_read_that_times_out_is_not_tried_again(server):
    control = ControlPlane(server.url, 5, lambda: None, ApiShape())
    began = time.monotonic()
    with pytest.raises(AssertionError, match="GET /hang got no answer within"):
        control.call("GET", "/hang", timeout=0.3)
    assert time.monotonic() - began < 0.9 and server.seen == ["GET"]


def test_the_first_call_left_unanswered_is_kept_for_the_teardown(server):
    """A test's engine whose call got no answer is stopped at teardown if the test failed
    (fixtures/plugin/engines.py): the client keeps which call it was."""
    control = TrackedControlPlane(server.url, 5, lambda: None, ApiShape(), {})
    assert control.call("GET", "/is_paused").status == 200 and control.unanswered is None
    for method in ("POST", "GET"):
        with pytest.raises(AssertionError, match="got no answer within"):
            control.call(method, "/hang", timeout=0.3)
    assert control.unanswered == "POST /hang"


class KeepAliveServer:
    """Answers the first request of each connection and keeps it open; a later request on the
    same connection is dropped unanswered, as when the server closes an idle keep-alive
    connection just as the client reuses it. Records (connection number, method, headers)."""

    KEEP = OK.replace(b"Content-Length", b"Connection: keep-alive\r\nContent-Length")

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.seen: list[tuple[int, str, str]] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        number = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            number += 1
            threading.Thread(target=self._connection, args=(conn, number), daemon=True).start()

    def _connection(self, conn: socket.socket, number: int) -> None:
        with conn:
            for answered in (True, False):
                data = conn.recv(65536).decode()
                if not data:
                    return
                self.seen.append((number, data.split(" ")[0], data.lower()))
                if not answered:
                    return
                conn.sendall(self.KEEP)


def test_a_lifecycle_call_never_goes_out_on_a_reused_connection():
    server = KeepAliveServer()
    try:
        control = ControlPlane(server.url, 5, lambda: None, ApiShape())
        assert control.call("GET", "/is_paused").status == 200
        assert control.call("POST", "/pause").status == 200
        assert control.call("POST", "/resume").status == 200
        posts = [(n, h) for n, m, h in server.seen if m == "POST"]
        assert [n for n, _ in posts] == [2, 3]  # each on a connection of its own
        assert all("connection: close" in h for _, h in posts)
    finally:
        server.sock.close()


def test_ctrl_c_during_a_blocking_request_stops_the_run_and_is_recorded() -> None:
    """A request the test waits on (a golden capture, say) must not swallow Ctrl-C / SIGTERM
    as a request error: the run would go on, judging an engine that did nothing wrong."""
    from types import SimpleNamespace

    from fixtures.observing.client import Generator

    gen = Generator("http://127.0.0.1:9", "m", 1.0, lambda: None)

    def interrupted(**kwargs):
        raise KeyboardInterrupt("signal 15")

    gen._client = SimpleNamespace(completions=SimpleNamespace(create=interrupted))  # type: ignore[assignment]
    with pytest.raises(KeyboardInterrupt):
        gen.complete("p", 4)

    def refused(**kwargs):
        raise ConnectionError("refused")

    gen._client = SimpleNamespace(completions=SimpleNamespace(create=refused))  # type: ignore[assignment]
    run = gen.complete("p", 4)
    assert isinstance(run.error, ConnectionError) and run.done.is_set()
