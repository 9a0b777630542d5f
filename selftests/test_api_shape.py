"""The target's reply shapes are a value each client carries, not process state: a release
before JSON bodies (0.31) and one with them (0.32), judged side by side in one process, get
different answers from the same judges, each with the message it always had."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from types import SimpleNamespace

import pytest

from conformance.misuse.test_invalid_params import refused_naming
from fixtures.judging.assertions import reply_is
from fixtures.judging.custody import _answer_problems
from fixtures.judging.offline_judges import return_problems
from fixtures.observing.api_shape import ApiShape
from fixtures.observing.client import ControlPlane
from fixtures.observing.offline import OfflineClient

OLD, NEW = ApiShape.of("0.31.0+cpu"), ApiShape.of("0.32.0")


class _Pre032(BaseHTTPRequestHandler):
    """A 0.31 engine as the clients meet it: lifecycle calls answer an empty 200, /sleep
    refuses a bad level with a bare 400, offline wake_up() returns None."""

    def do_POST(self) -> None:
        if self.path == "/op":
            self._answer(200, json.dumps({"result": {"value": None, "seconds": 0.01}}).encode())
        else:
            self._answer(400 if "level=abc" in self.path else 200, b"")

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def url() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Pre032)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_version_decides_the_shape() -> None:
    assert not OLD.body_in_contract("/sleep?level=1") and not OLD.route_validation
    assert OLD.body_in_contract("/pause?mode=keep") and OLD.value_in_contract("sleep")
    assert not OLD.value_in_contract("wake_up")
    for newest in (NEW, ApiShape.of(None), ApiShape.of("not a version"), ApiShape.of("0.33.0rc1")):
        assert newest.body_in_contract("/sleep?level=1") and newest.route_validation
        assert newest.value_in_contract("wake_up")


def test_two_releases_judged_side_by_side_over_http(url: str) -> None:
    old, new = (ControlPlane(url, 5, lambda: None, shape) for shape in (OLD, NEW))
    expected = {"status": "sleeping", "level": 1}

    reply_is(old.sleep(1), 200, expected)  # the empty 200 of 0.31: judged on the status
    assert _answer_problems(old.sleep(1), expected) == []
    refused_naming(SimpleNamespace(control=old), old.sleep("abc"), "query.level")

    with pytest.raises(AssertionError, match=re.escape(
            "expected 200 {'status': 'sleeping', 'level': 1}; observed POST /sleep?level=1 -> 200 '' (")):
        reply_is(new.sleep(1), 200, expected)
    [problem] = _answer_problems(new.sleep(1), expected)
    assert problem.startswith("lifecycle call: expected 200 {'status': 'sleeping', 'level': 1}; "
                              "observed POST /sleep?level=1 -> 200 '' (")
    with pytest.raises(AssertionError, match=re.escape(
            "expected 400 with error.param 'query.level'; observed POST /sleep?level=abc -> 400 '' (")):
        refused_naming(SimpleNamespace(control=new), new.sleep("abc"), "query.level")


def test_two_releases_judged_side_by_side_offline(url: str) -> None:
    server = SimpleNamespace(url=url, ensure_alive=lambda: None)
    old, new = (OfflineClient(server, None, 5, shape)  # type: ignore[arg-type]
                for shape in (OLD, NEW))

    assert return_problems(old.call("wake_up"), True) == []
    assert return_problems(new.call("wake_up"), True) == ["wake_up() returned None (0.01 s); expected True"]
    # Only wake_up's value is outside 0.31's contract.
    assert return_problems(old.call("sleep"), True) == ["sleep() returned None (0.01 s); expected True"]
