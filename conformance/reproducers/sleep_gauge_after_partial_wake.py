#!/usr/bin/env python3
"""[Bug]: vllm:engine_sleep_state reads awake after a wake of one memory tag while the engine still sleeps

After POST /sleep?level=1 (or 2), a wake of one tag (POST /wake_up?tags=weights, kv_cache or
scheduling) sets the gauge vllm:engine_sleep_state to awake (1,0,0) although /is_sleeping stays
true and the other tag is still asleep. From vLLM 0.31.0 the level's gauge stays until the
engine is fully awake. With data parallelism every engine label reads awake (case weights-dp2:
two data-parallel engines of a model that declares experts, as its printed server line says).

Needs: Python 3.9+, requests, and a vLLM server started as this script prints.
Run:   python sleep_gauge_after_partial_wake.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

# ---- common to every HTTP reproducer here; a self-test keeps it identical in each ----

SHOWS, BEHAVES, UNCLEAR = 1, 0, 2  # the exit codes
URL = "http://127.0.0.1:8000"  # the server's, from the command line
EXPERTS = ('  # MODEL must declare experts, or vLLM runs the ranks as independent engines: an MoE '
           'model, or a dense one with "num_local_experts": 2 added to its config.json')
TIED = ('  # MODEL: a local folder of safetensors whose config ties lm_head to embed_tokens '
        '("tie_word_embeddings": true, e.g. Qwen2.5-0.5B)')


class Unclear(Exception):  # noqa: N818 (the verdict it stands for)
    """No answer a verdict can rest on (exit 2)."""


@dataclass(frozen=True)
class Case:
    name: str
    says: tuple[str, str]  # what vLLM says the behaviour is, and where (a file of the vllm package)
    expected: str
    run: Callable[[], tuple[bool, str]]  # -> (it shows, what was seen)
    serve_args: tuple[str, ...] = ()
    serve_env: tuple[tuple[str, str], ...] = (("VLLM_SERVER_DEV_MODE", "1"),)
    engines: int = 1  # data-parallel engines
    tied_head: bool = False  # MODEL must tie its lm_head to its embed_tokens
    leaves_server_dead: bool = False  # where it shows

    def serve_command(self) -> str:
        dp = ("--data-parallel-size", str(self.engines)) if self.engines > 1 else ()
        return " ".join([*(f"{k}={v}" for k, v in self.serve_env), "vllm serve MODEL",
                         *map(shlex.quote, (*dp, *self.serve_args))]) + (EXPERTS * bool(dp)
                                                                          + TIED * self.tied_head)


def brief(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    text = "(Prometheus text)" if text.startswith("# HELP") else " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + " ..."


def call(method: str, path: str, body: Any = None, timeout: float = 30.0,
         headers: dict[str, str] | None = None) -> tuple[int | None, Any]:
    """One call, printed with its answer and time; bounded, never retried. Status None: no answer."""
    began = time.monotonic()
    try:
        reply = requests.request(method, URL + path, json=body, headers=headers, timeout=timeout)
        status, got = reply.status_code, reply.text
        with contextlib.suppress(ValueError):
            got = reply.json()
    except requests.RequestException as exc:
        status, got = None, f"no answer: {type(exc).__name__}"
    sent = "" if body is None else brief(body, 200) + " "
    print(f"  {method} {path} {sent}-> {status} {brief(got)} ({time.monotonic() - began:.2f} s)")
    return status, got


def expect(method: str, path: str, body: Any = None) -> Any:
    """A call the sequence rests on: any answer but 200 leaves no verdict."""
    status, got = call(method, path, body)
    if status != 200:
        raise Unclear(f"{method} {path} answered {status}; the sequence needs 200")
    return got


def model() -> str:
    return str(expect("GET", "/v1/models")["data"][0]["id"])


def describe(cases: dict[str, Case]) -> dict[str, Any]:
    return {name: {**{k: v for k, v in vars(c).items() if k != "run"}, "serve_env": dict(c.serve_env),
                   "serve_command": c.serve_command()} for name, c in cases.items()}


def main(cases: dict[str, Case], shows: str, doc: str) -> int:
    global URL
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("url", nargs="?", help="the server's base URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--case", action="append", choices=list(cases), help="repeatable; default: all")
    parser.add_argument("--describe", action="store_true", help="print the cases as JSON and exit")
    args = parser.parse_args()
    if args.describe:
        print(json.dumps(describe(cases), indent=2))
        return BEHAVES
    if not args.url:
        parser.error("the server's base URL is required")
    sys.stdout.reconfigure(line_buffering=True)
    URL, verdicts = args.url.rstrip("/"), {SHOWS: shows, BEHAVES: "behaves", UNCLEAR: "could not tell"}
    codes = [] if call("GET", "/version", timeout=10)[0] == 200 else [UNCLEAR]
    for case in [] if codes else [cases[name] for name in args.case or cases]:
        print(f"\ncase {case.name}, on a server started as: {case.serve_command()}")
        try:
            if case.engines > 1 and len(set(re.findall(
                    r'engine="(\d+)"', str(call("GET", "/metrics")[1])))) < case.engines:
                raise Unclear(f"this case needs a server of {case.engines} data-parallel engines")
            shown, seen = case.run()
            codes.append(SHOWS if shown else BEHAVES)
        except Unclear as exc:
            codes.append(UNCLEAR)
            seen = str(exc)
        print(f"  vLLM says ({case.says[1]}): {case.says[0]}\n  expected: {case.expected}\n"
              f"  seen: {seen}\n  verdict: {verdicts[codes[-1]]}")
    code = SHOWS if SHOWS in codes else UNCLEAR if UNCLEAR in codes else BEHAVES
    print(f"\nresult: exit {code} ({verdicts[code]})")
    return code

# ---- end of the common part ----

SAYS = (  # what vLLM 0.32.0 says, and where (a file of the vllm package)
    "awake = 1 means engine is awake;",
    "v1/metrics/loggers.py, vllm:engine_sleep_state gauge documentation (PrometheusStatLogger)")
STATES = ("awake", "weights_offloaded", "discard_all")
ASLEEP = {1: (0.0, 1.0, 0.0), 2: (0.0, 0.0, 1.0)}
SAMPLE = re.compile(r'^vllm:engine_sleep_state\{([^}]*)\}\s+(\S+)', re.M)


def gauges() -> dict[str, tuple[float, ...]]:
    """vllm:engine_sleep_state per engine label: (awake, weights_offloaded, discard_all)."""
    seen: dict[str, dict[str, float]] = {}
    for labels, value in SAMPLE.findall(str(expect("GET", "/metrics"))):
        label = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        seen.setdefault(label.get("engine", "?"), {})[label.get("sleep_state", "?")] = float(value)
    return {engine: tuple(values.get(s, float("nan")) for s in STATES) for engine, values in seen.items()}


def partial_wake(level: int, tag: str) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        expect("POST", f"/sleep?level={level}")
        try:
            expect("POST", f"/wake_up?tags={tag}")
            sleeping = expect("GET", "/is_sleeping").get("is_sleeping")
            read = gauges()
        finally:
            call("POST", "/wake_up")  # leave the engine as it was found
        wrong = sorted(engine for engine, gauge in read.items() if gauge != ASLEEP[level])
        return bool(wrong) or not read or sleeping is not True, (
            f"/is_sleeping {sleeping}; vllm:engine_sleep_state {read}"
            + (f": not the level-{level} reading on engine {', '.join(wrong)}" if wrong else ""))
    return run


def case(name: str, level: int, tag: str, engines: int = 1) -> Case:
    return Case(name, SAYS, f"after /sleep?level={level} and /wake_up?tags={tag}: /is_sleeping true, "
                f"vllm:engine_sleep_state {ASLEEP[level]} on every engine", partial_wake(level, tag),
                engines=engines)


CASES = {c.name: c for c in (
    case("weights", 1, "weights"),
    case("kv_cache", 1, "kv_cache"),
    case("scheduling", 1, "scheduling"),
    case("scheduling-level2", 2, "scheduling"),
    case("weights-dp2", 1, "weights", engines=2))}

if __name__ == "__main__":
    sys.exit(main(CASES, "BUG", __doc__ or ""))
