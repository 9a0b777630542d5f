#!/usr/bin/env python3
"""[Bug]: a streaming request aborted before its first token ends with no finish_reason

A streaming request held by POST /pause?mode=keep and then cut, by POST /pause?mode=abort or by
POST /abort_requests naming it, ends with "data: [DONE]" and no choice carrying a
finish_reason: the client cannot tell an aborted request from a truncated stream.

Needs: Python 3.9+, requests, and a vLLM server started as this script prints.
Run:   python abort_stream_no_finish_reason.py http://127.0.0.1:8000 [--case NAME]...
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import contextlib
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

# What vLLM 0.32.0 says of each case's behaviour, and where (a file of the vllm package).
EXTERNAL_API = (
    "These are possible values of RequestOutput.finish_reason, so form part of the external API.",
    "v1/engine/__init__.py, comment above FINISH_REASON_STRINGS")
REASONS = (
    "Reason a request finished - stop, length, abort, error, or repetition.",
    "v1/engine/__init__.py, FinishReason docstring")
LOAD_FLAG = ("--enable-server-load-tracking",)  # GET /load: the request has reached the server


def held_stream(path: str, request_id: str = "") -> tuple[threading.Thread, list[str]]:
    """Pause with keep, then a streaming request read in the background: held, no token yet."""
    body: dict[str, Any] = {"model": model(), "max_tokens": 32, "ignore_eos": True, "stream": True}
    body |= {"messages": [{"role": "user", "content": "held"}]} if "chat" in path else {"prompt": "held"}
    lines: list[str] = []

    def read() -> None:
        with contextlib.suppress(requests.RequestException), requests.post(
                URL + path, json=body, headers={"X-Request-Id": request_id} if request_id else {},
                stream=True, timeout=30) as reply:
            lines.extend(line[5:].strip() for line in reply.iter_lines(decode_unicode=True)
                         if line.startswith("data:"))

    expect("POST", "/pause?mode=keep")
    print(f"  POST {path} {brief(body)} (streamed, read in the background)")
    stream = threading.Thread(target=read, daemon=True)
    stream.start()
    for _ in range(20):
        if (expect("GET", "/load").get("server_load") or 0) >= 1:
            time.sleep(1.0)  # the front-end registers it once the prompt is processed
            return stream, lines
        time.sleep(0.5)
    raise Unclear("the request was not accepted within 10 s (GET /load stayed 0)")


def ended(stream: threading.Thread, lines: list[str]) -> tuple[bool, str]:
    stream.join(30)
    call("POST", "/resume")  # leave the engine as it was found
    if stream.is_alive() or "[DONE]" not in lines:
        raise Unclear(f"the stream did not end cleanly within 30 s: {lines}")
    reasons = [c.get("finish_reason") for line in lines if line != "[DONE]"
               for c in json.loads(line).get("choices") or [] if c.get("finish_reason")]
    return reasons != ["abort"], f"finish reasons {reasons}; data lines: {brief(lines)}"


def cut_by_pause(path: str) -> Callable[[], tuple[bool, str]]:
    def run() -> tuple[bool, str]:
        stream, lines = held_stream(path)
        expect("POST", "/pause?mode=abort")
        return ended(stream, lines)
    return run


def abort_by_id() -> tuple[bool, str]:
    request_id = f"held-{time.time_ns()}"
    stream, lines = held_stream("/v1/completions", request_id)
    # The engine's id of the only choice of a completion sent with X-Request-Id: <id>.
    expect("POST", "/abort_requests", {"request_ids": [f"cmpl-{request_id}-0"]})
    return ended(stream, lines)


ENDS = 'the stream ends with one final choice whose finish_reason is "abort"'
CASES = {name: Case(name, says, ENDS, run, serve_args=LOAD_FLAG) for name, says, run in (
    ("completions", EXTERNAL_API, cut_by_pause("/v1/completions")),
    ("chat", EXTERNAL_API, cut_by_pause("/v1/chat/completions")),
    ("abort-by-id", REASONS, abort_by_id))}

if __name__ == "__main__":
    sys.exit(main(CASES, "BUG", __doc__ or ""))
