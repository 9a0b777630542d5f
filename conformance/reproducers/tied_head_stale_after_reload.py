#!/usr/bin/env python3
"""[Bug]: on CPU, reloading a model whose lm_head is tied to embed_tokens leaves the head on the old weights

vLLM's layerwise reload re-processes each layer it loaded. A tied checkpoint holds no
lm_head.weight, so the ParallelLMHead layer loads nothing and is only put back as it was
("ParallelLMHead: Failed to load weights" in the worker's log). On CPU its GEMM runs on a packed
copy of the weight made when it was last processed (dispatch_cpu_unquantized_gemm), so after the
reload the embeddings are the new checkpoint's and the head is still the old one: the engine
serves neither checkpoint. Seen through collective_rpc reload_weights with another weights_path
and through a weight-update session alike.

The sequence needs no second model: it reloads MODEL's own checkpoint with two rows of
embed_tokens swapped, a relabelling of two tokens the prompt does not use. An engine whose head
follows the embeddings then writes, where it wrote the first of them, the second; one whose head
stayed behind writes the first again. MODEL is reloaded from its own folder after.

Needs: Python 3.9+, requests, the server's model folder readable and a temporary folder the
server can read (the same machine), and a vLLM server started as this script prints.
Run:   python tied_head_stale_after_reload.py http://127.0.0.1:8000
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import shutil
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
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
    "Reload a model's weights in place from a weights iterator or from disk.",
    "model_executor/model_loader/reload/inplace.py, reload_weights docstring")
PROMPT = "the head follows the embeddings"


def greedy(name: str) -> list[int]:
    body = {"model": name, "prompt": PROMPT, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
            "return_token_ids": True}
    ids = expect("POST", "/v1/completions", body)["choices"][0].get("token_ids")
    if not ids:
        raise Unclear("the completion returned no token_ids (return_token_ids): this sequence needs them")
    return list(ids)


def reload_from(folder: str) -> None:
    expect("POST", "/pause?mode=keep")
    try:
        expect("POST", "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": folder}})
    finally:
        call("POST", "/resume")


ITEM_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1}


def swapped_copy(folder: Path, i: int, j: int, into: Path) -> None:
    """MODEL's folder with rows i and j of embed_tokens swapped in place of the bytes (the
    safetensors layout: an 8-byte header length, a JSON header, the tensors' bytes); other
    files linked."""
    for item in folder.iterdir():
        if item.suffix != ".safetensors":
            if item.is_file():
                (into / item.name).symlink_to(item)
            continue
        dest = into / item.name
        shutil.copyfile(item, dest)
        with dest.open("r+b") as handle:
            size = struct.unpack("<Q", handle.read(8))[0]
            header = json.loads(handle.read(size))
            for name, meta in header.items():
                if not name.endswith("embed_tokens.weight"):
                    continue
                row = meta["shape"][1] * ITEM_BYTES[meta["dtype"]]
                start = 8 + size + meta["data_offsets"][0]
                rows = {}
                for k in (i, j):
                    handle.seek(start + k * row)
                    rows[k] = handle.read(row)
                for k, other in ((i, j), (j, i)):
                    handle.seek(start + k * row)
                    handle.write(rows[other])


def tied_reload() -> tuple[bool, str]:
    listed = expect("GET", "/v1/models")["data"][0]
    folder = Path(str(listed.get("root") or ""))
    config = folder / "config.json"
    if not config.is_file() or not list(folder.glob("*.safetensors")):
        raise Unclear(f"the model's root {str(folder)!r} is not a local folder of safetensors")
    if not json.loads(config.read_text()).get("tie_word_embeddings"):
        raise Unclear("the model does not tie lm_head to embed_tokens: this case needs one that does")
    before = greedy(listed["id"])
    prompt = set(expect("POST", "/tokenize", {"model": listed["id"], "prompt": PROMPT})["tokens"])
    k = next((n for n, t in enumerate(before) if t not in prompt), None)
    if k is None:
        raise Unclear(f"every token of the output {before} is in the prompt: no token to relabel")
    i = before[k]
    j = next(t for t in range(3, 1 << 20) if t not in prompt and t not in before)
    with tempfile.TemporaryDirectory() as tmp:
        swapped_copy(folder, i, j, Path(tmp))
        reload_from(tmp)
        try:
            after = greedy(listed["id"])
        finally:
            reload_from(str(folder))
    # Up to position k the prompt and the output use neither token: the run is the same. At k the
    # engine picks the token whose head row is the old row of i: j if the head was reloaded.
    if after[:k] != before[:k]:
        raise Unclear(f"the output after the reload {after} differs from {before} before position {k}")
    if after[k] == j:
        return False, f"the reload relabelled token {i} as {j} at position {k} ({before} -> {after})"
    if after[k] == i:
        return True, (f"after the reload with rows {i} and {j} of embed_tokens swapped the engine still "
                      f"wrote {i} at position {k} ({before} -> {after}), not {j}: its lm_head kept the "
                      f"old weights")
    raise Unclear(f"at position {k} the reload wrote {after[k]}, neither {i} nor {j} ({before} -> {after})")


CASES = {"tied-reload": Case(
    "tied-reload", SAYS,
    "after a reload with two rows of embed_tokens swapped, the second token where the first was written",
    tied_reload, tied_head=True)}

if __name__ == "__main__":
    sys.exit(main(CASES, "BUG", __doc__ or ""))
