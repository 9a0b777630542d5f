"""A stand-in for `vllm serve` in the suite's own tests: answers /health on --port.

Behaviour is chosen by environment variables so launch configs can differ:
  FAKE_MODE=ok (default) | exit (exit 3 at once) | hang (never healthy)
  FAKE_CHILD=1            also start a child that ignores SIGTERM (group kill must reach it)
  FAKE_LOG="text"         printed at start (runner / dev-mode log lines)
  FAKE_RUNNER_V2=0|1      what /server_info reports for VLLM_USE_V2_MODEL_RUNNER
  FAKE_POST=ok|hang|die   every POST answers {} | never answers | kills the server
It also answers /version, /server_info and /v1/models like vLLM, for the external-target probe.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import time


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    print(os.environ.get("FAKE_LOG", "fake server starting"), flush=True)
    mode = os.environ.get("FAKE_MODE", "ok")
    if mode == "exit":
        print("fatal: refusing to start", flush=True)
        sys.exit(3)
    if os.environ.get("FAKE_CHILD") == "1":
        subprocess.Popen([sys.executable, "-c",
                          "import signal,time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)"])
    if mode == "hang":
        time.sleep(600)

    runner = int(os.environ.get("FAKE_RUNNER_V2", "0"))
    answers = {
        "/version": {"version": "0.32.0"},
        "/server_info?config_format=json": {
            "vllm_env": {"VLLM_USE_V2_MODEL_RUNNER": runner},
            "vllm_config": {"device_config": {"device": "cpu"}},
            "system_env": {"torch_version": "2.13.0+cpu", "is_cuda_available": "False"},
        },
        "/v1/models": {"data": [{"id": "fake-model"}]},
    }

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answers.get(self.path)
            self.send_response(200 if self.path == "/health" or body is not None else 404)
            self.end_headers()
            if body is not None:
                self.wfile.write(json.dumps(body).encode())

        def do_POST(self) -> None:
            behaviour = os.environ.get("FAKE_POST", "ok")
            if behaviour == "hang":
                time.sleep(600)
            if behaviour == "die":
                print("fake server: dying on a POST", flush=True)
                os._exit(1)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a: object) -> None:
            pass

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
