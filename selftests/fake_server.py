"""A stand-in for `vllm serve` in the suite's own tests: answers /health on --port.

Behaviour is chosen by environment variables so launch configs can differ:
  FAKE_MODE=ok (default) | exit (exit 3 at once) | hang (never healthy)
  FAKE_CHILD=1            also start a child that ignores SIGTERM (group kill must reach it)
  FAKE_LOG="text"         printed at start (runner / dev-mode log lines)
  FAKE_RUNNER_V2=0|1      what /server_info reports for VLLM_USE_V2_MODEL_RUNNER
  FAKE_SLEEP_MODE=off     vLLM's non-default-args line leaves sleep mode out whatever the
                          arguments say (by default it names it when --enable-sleep-mode is given)
  FAKE_POST=ok|hang|die   every POST answers {} | never answers | kills the server
  FAKE_FATAL_ON=/route    the engine's own death on a POST to that route: vLLM's fatal-error
                          lines, then the exit (FAKE_FATAL_ERROR: the exception line it names)
  FAKE_POST=vllm          a small GPU engine: vLLM 0.32's lifecycle bodies and state, minimal
                          /v1/completions and /metrics, device memory written to FAKE_NVML_STATE
                          (read by selftests/fake_nvml); FAKE_GPU_FAULT breaks it (see GpuEngine)
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
from urllib.parse import parse_qs, urlsplit

GIB = 1 << 30
# A small model on a 16 GiB device by default; FAKE_GPU_KV_GIB / FAKE_GPU_TOTAL_GIB make the KV
# cache dominate (Qwen3-0.6B on an H200: ~1.1 GiB weights, ~110 GiB KV cache).
WEIGHTS_GIB, CONTEXT_GIB = 1.1, 0.5
LEAK_PER_SLEEP = 128 << 20
SLEEP_STATE_NAMES = ("awake", "weights_offloaded", "discard_all")


class GpuEngine:
    """Sleep/wake/pause state of vLLM 0.32 and the device memory it maps, written to a file.

    FAKE_GPU_FAULT breaks it the ways the device-memory behaviours must catch:
      sleep-keeps-weights   a level 1/2 sleep leaves the weights mapped
      wake-skips-weights    no wake ever re-maps the weights
      leak                  every sleep leaves LEAK_PER_SLEEP bytes behind for good
      regrab                right after a level 1/2 sleep is read, the engine takes its KV cache
                            bytes back: NVML showed them freed, another process cannot have them
    """

    def __init__(self, state_file: str, fault: str) -> None:
        self.state_file, self.fault = state_file, fault
        # Bytes as the log reports them (GiB with two decimals), so the suite's sizes match.
        self.kv_gib = float(os.environ.get("FAKE_GPU_KV_GIB") or 10.0)
        self.total = int(float(os.environ.get("FAKE_GPU_TOTAL_GIB") or 16) * GIB)
        self.weights = int(float(f"{WEIGHTS_GIB:.2f}") * GIB)
        self.kv = int(float(f"{self.kv_gib:.2f}") * GIB)
        self.weights_mapped = self.kv_mapped = True
        self.level: int | None = None  # None: awake
        self.woken: set[str] = set()  # tags woken since the last sleep
        self.paused = False
        self.leaked = 0
        self.write()

    def used(self) -> int:
        return (int(CONTEXT_GIB * GIB) + self.leaked + self.weights * self.weights_mapped
                + self.kv * self.kv_mapped)

    def write(self) -> None:
        tmp = self.state_file + ".tmp"
        with open(tmp, "w") as f:
            # "used" is what NVML reads now; "used_later" what an allocator meets afterwards.
            regrabbed = self.kv if self.fault == "regrab" and self.level and not self.kv_mapped else 0
            json.dump({"used": self.used(), "used_later": self.used() + regrabbed, "total": self.total}, f)
        os.replace(tmp, self.state_file)  # a reader never sees half a file

    def sleep(self, level: int) -> dict[str, object]:
        if self.level is None:
            self.level, self.woken = level, set()
            if level >= 1:
                self.kv_mapped = False
                self.weights_mapped = self.fault == "sleep-keeps-weights"
                if self.fault == "leak":
                    self.leaked += LEAK_PER_SLEEP
        self.write()
        return {"status": "sleeping", "level": self.level}

    def wake(self, tags: list[str]) -> dict[str, object]:
        tags = tags or ["weights", "kv_cache"]
        if "weights" in tags and self.fault != "wake-skips-weights":
            self.weights_mapped = True
        if "kv_cache" in tags:
            self.kv_mapped = True
        # Awake once every tag was woken (vLLM tracks tags, not bytes).
        self.woken |= set(tags)
        if not self.level or {"weights", "kv_cache"} <= self.woken:
            self.level, self.woken = None, set()
        self.write()
        return {"status": "awake" if self.level is None else "sleeping", "tags": tags}

    def metrics(self) -> str:
        state = "awake" if not self.level else SLEEP_STATE_NAMES[self.level]
        return "".join(f'vllm:engine_sleep_state{{engine="0",sleep_state="{s}"}} {float(s == state)}\n'
                       for s in SLEEP_STATE_NAMES)


def completion(body: dict[str, object]) -> dict[str, object]:
    """A greedy completion of exactly max_tokens tokens (ignore_eos), with ids and logprobs."""
    n = int(str(body.get("max_tokens") or 16))
    choice: dict[str, object] = {"index": 0, "text": " x" * n, "finish_reason": "length",
                                 "token_ids": [7] * n}
    if body.get("logprobs") is not None:
        choice["logprobs"] = {"tokens": [" x"] * n, "token_logprobs": [-0.5] * n,
                              "top_logprobs": [{" x": -0.5}] * n, "text_offset": list(range(0, 2 * n, 2))}
    return {"id": "cmpl-fake", "object": "text_completion", "created": int(time.time()),
            "model": body.get("model"), "choices": [choice],
            "usage": {"prompt_tokens": 4, "completion_tokens": n, "total_tokens": n + 4}}


def main() -> None:
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    print(os.environ.get("FAKE_LOG", "fake server starting"), flush=True)
    reported = {"port": port}
    if "--enable-sleep-mode" in args and os.environ.get("FAKE_SLEEP_MODE") != "off":
        reported["enable_sleep_mode"] = True
    print(f"(APIServer pid={os.getpid()}) INFO 12-06 00:00:00 [api_utils.py:286] non-default args: "
          f"{reported!r}", flush=True)
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

    gpu = None
    if os.environ.get("FAKE_POST") == "vllm":
        gpu = GpuEngine(os.environ["FAKE_NVML_STATE"], os.environ.get("FAKE_GPU_FAULT", ""))
        print(f"Model loading took {WEIGHTS_GIB:.2f} GiB memory and 3.1 seconds", flush=True)
        print(f"Available KV cache memory: {gpu.kv_gib:.2f} GiB", flush=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        def reply(self, status: int, body: object) -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def vllm_get(self, engine: GpuEngine) -> bool:
            path = urlsplit(self.path).path
            if path == "/is_sleeping":
                self.reply(200, {"is_sleeping": engine.level is not None})
            elif path == "/is_paused":
                self.reply(200, {"is_paused": engine.paused})
            elif path == "/metrics":
                self.reply(200, engine.metrics())
            else:
                return False
            return True

        def vllm_post(self, engine: GpuEngine) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            if url.path == "/sleep":
                self.reply(200, engine.sleep(int(query.get("level", ["1"])[0])))
            elif url.path == "/wake_up":
                self.reply(200, engine.wake(query.get("tags", [])))
            elif url.path == "/pause":
                engine.paused = True
                self.reply(200, {"status": "paused"})
            elif url.path == "/resume":
                engine.paused = False
                self.reply(200, {"status": "resumed"})
            elif url.path == "/collective_rpc":
                self.reply(200, {"results": [None]})
            elif url.path == "/v1/completions":
                self.reply(200, completion(body))
            else:
                self.reply(200, {})

        def do_GET(self) -> None:
            if gpu is not None and self.vllm_get(gpu):
                return
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
            if os.environ.get("FAKE_FATAL_ON") and self.path.startswith(os.environ["FAKE_FATAL_ON"]):
                print("(EngineCore pid=7) ERROR 12-03 08:00:00 [core.py:1512] EngineCore "
                      "encountered a fatal error.\n(EngineCore pid=7) Traceback (most recent call "
                      "last):\n(EngineCore pid=7)   File \"core.py\", line 1, in run_busy_loop\n"
                      "(EngineCore pid=7)     raise RuntimeError(\"x\")\n(EngineCore pid=7) "
                      + os.environ.get("FAKE_FATAL_ERROR", "RuntimeError: Tensor on device cpu is "
                                       "not on the expected device meta!"),
                      flush=True)
                os._exit(1)
            if gpu is not None:
                self.vllm_post(gpu)
                return
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *a: object) -> None:
            pass

    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
