"""The exploration's replay: the shrunk sequence as a standalone script (fixtures/judging/replay.py
filled in by History.replay_script), weight syncs included, judged by the model's predictions."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from fixtures.judging import reference_model as model

SYNC = [("/start_weight_update", None, 200),
        ("/update_weights", {"update_info": {"path": "/ckpt/B.safetensors", "names": ["w"]}}, 200),
        ("/finish_weight_update", {"weight_version": "v1"}, 200)]


class Engine(http.server.BaseHTTPRequestHandler):
    """Paused or not, and what /pause answers: enough to agree or disagree with the model."""

    pause_status = 200
    paused = False
    completion: ClassVar[dict[str, Any]] = {"choices": [{"text": "x"}]}
    seen: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any, text: bool = False) -> None:
        data = (body if text else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        cls = type(self)
        answers = {"/version": {"version": "stub"}, "/v1/models": {"data": [{"id": "m"}]},
                   "/is_sleeping": {"is_sleeping": cls.paused}, "/is_paused": {"is_paused": cls.paused}}
        if self.path == "/metrics":
            gauge = "".join(f'vllm:engine_sleep_state{{engine="0",sleep_state="{s}"}} {v}\n'
                            for s, v in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)))
            self._send(200, gauge, text=True)
        else:
            self._send(200, answers[self.path])

    def do_POST(self) -> None:
        cls = type(self)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        cls.seen.append(f"{self.path} {body}".strip())
        if self.path.startswith("/pause"):
            cls.paused = cls.pause_status == 200
            self._send(cls.pause_status, {"status": "paused"})
        elif self.path == "/v1/completions":
            self._send(200, cls.completion)
        else:
            self._send(200, {})


@pytest.fixture
def engine() -> Iterator[type[Engine]]:
    handler = type("Stub", (Engine,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
    yield handler
    server.shutdown()


def replay(tmp_path: Path) -> Path:
    history = model.History("http://127.0.0.1:8000")
    history.call("POST", "/pause?mode=keep", expected=200)
    history.sync("weight sync of checkpoint B", SYNC)
    history.request(1, 8, "lifecycle-model")
    final = model.State(paused=True, held=(1,))
    path = tmp_path / "replay.py"
    path.write_text(history.replay_script("VLLM_SERVER_DEV_MODE=1 vllm serve MODEL", ["flags/pause-resume"],
                                          final))
    return path


def run(path: Path, url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(path), url], capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_replay_sends_the_sync_and_agrees_with_the_model(tmp_path: Path, engine: type[Engine]) -> None:
    script = replay(tmp_path)
    compile(script.read_text(), str(script), "exec")
    done = run(script, engine.url)  # type: ignore[attr-defined]
    assert '/update_weights {"update_info": {"path": "/ckpt/B.safetensors", "names": ["w"]}}' in engine.seen
    assert '/finish_weight_update {"weight_version": "v1"}' in engine.seen
    # The stub answers the request at once although the model holds it: a discrepancy.
    assert done.returncode == 1 and "request 1 was answered while the model holds it" in done.stdout
    assert "state: {'is_sleeping': True, 'is_paused': True, 'gauge': [1, 0, 0]}" in done.stdout
    assert done.stdout.count("discrepancy:") == 1  # flags and gauge as the model predicts


def test_a_status_the_model_does_not_predict_is_a_discrepancy(tmp_path: Path, engine: type[Engine]) -> None:
    engine.pause_status = 500
    done = run(replay(tmp_path), engine.url)  # type: ignore[attr-defined]
    assert done.returncode == 1
    assert "POST /pause?mode=keep answered 500, the model predicts 200" in done.stdout


def test_no_server_is_could_not_tell(tmp_path: Path) -> None:
    assert run(replay(tmp_path), "http://127.0.0.1:9").returncode == 2


def _running_replay(tmp_path: Path) -> Path:
    """A long request started while runnable and no call since that may end it: the model
    leaves it running, so it may only finish in full."""
    history = model.History("http://127.0.0.1:8000")
    history.request(1, 8, "lifecycle-model")
    history.call("POST", "/resume", expected=200)
    path = tmp_path / "replay.py"
    path.write_text(history.replay_script("SERVE", ["misuse/resume-while-running"],
                                          model.start(model.State(), 1).state))
    return path


def test_a_running_request_that_does_not_finish_in_full_is_a_discrepancy(
        tmp_path: Path, engine: type[Engine]) -> None:
    done = run(_running_replay(tmp_path), engine.url)  # type: ignore[attr-defined]
    # The stub's answer has no finish reason 'length' (as a request cut by an abort).
    assert done.returncode == 1 and "request 1 did not finish in full" in done.stdout


def test_a_running_request_that_finishes_in_full_agrees_with_the_model(
        tmp_path: Path, engine: type[Engine]) -> None:
    engine.completion = {"choices": [{"text": "x", "finish_reason": "length"}],
                         "usage": {"completion_tokens": 8}}
    done = run(_running_replay(tmp_path), engine.url)  # type: ignore[attr-defined]
    assert done.returncode == 0, done.stdout
