#!/usr/bin/env python3
"""[Feature]: a weight-update session call out of order should answer 4xx, not 500

Each breach of the weight-update session's rules (a chunk before start_weight_update,
finish_weight_update without a session, a second start_weight_update) is refused with a message
that names the rule ("start_weight_update must be called before update_weights.", ...), but as
500 InternalServerError: the worker's RuntimeError comes back through collective_rpc as a server
error, and a client that retries 5xx retries a call that can never succeed.

Uses vLLM's built-in nccl weight-transfer backend with no trainer connected: the worker checks the
session rules before the backend is reached, so any backend shows the same.

Needs: Python 3.9+, requests, and a vLLM server started as this script prints.
Run:   python weight_session_misuse_500.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 it shows, 0 the engine answers 4xx, 2 could not tell.
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
    "start_weight_update must be called before update_weights.",
    "v1/worker/gpu_worker.py, Worker.update_weights RuntimeError")
SHOWS_AS = "the caller's error is reported as a server error (feature request)"
BACKEND = ("--weight-transfer-config", '{"backend": "nccl"}')
# A chunk's metadata for the nccl backend; the session rule refuses it before any transfer.
CHUNK = {"update_info": {"names": ["lm_head.weight"], "dtype_names": ["float32"], "shapes": [[1]]}}


def refused(call: str, status: int | None, body: Any, names: str) -> tuple[bool, str]:
    if status in (None, 404):
        raise Unclear(f"{call} got no answer, or is not served (no VLLM_SERVER_DEV_MODE=1, or a vLLM "
                      f"without weight-transfer routes)")
    named = names in json.dumps(body)
    return not (400 <= status < 500 and named), (
        f"{call} answered {status} {'naming' if named else 'without naming'} {names!r}")


def chunk_before_start() -> tuple[bool, str]:
    return refused("POST /update_weights", *call("POST", "/update_weights", CHUNK),
                   "start_weight_update")


def finish_without_start() -> tuple[bool, str]:
    return refused("POST /finish_weight_update", *call("POST", "/finish_weight_update", {}),
                   "start_weight_update")


def start_twice() -> tuple[bool, str]:
    expect("POST", "/pause?mode=keep")
    try:
        expect("POST", "/start_weight_update")
        return refused("the second POST /start_weight_update",
                       *call("POST", "/start_weight_update"), "active")
    finally:  # close the session with no chunk loaded (the weights stay) and resume
        call("POST", "/finish_weight_update", {})
        call("POST", "/resume")


REFUSED = "a 4xx whose message names the session rule"
CASES = {name: Case(name, SAYS, REFUSED, run, serve_args=BACKEND) for name, run in (
    ("chunk-before-start", chunk_before_start), ("finish-without-start", finish_without_start),
    ("start-twice", start_twice))}

if __name__ == "__main__":
    sys.exit(main(CASES, SHOWS_AS, __doc__ or ""))
