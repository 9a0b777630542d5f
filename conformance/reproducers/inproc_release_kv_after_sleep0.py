#!/usr/bin/env python3
"""[Bug]: in-process LLM: release_kv_cache_memory() after sleep(level=0) says "requires a completed pause"

With the engine core in the caller's process (VLLM_ENABLE_V1_MULTIPROCESSING=0), generate();
sleep(level=0); release_kv_cache_memory() raises RuntimeError("release_kv_cache_memory() requires
a completed pause first"): the request that just finished is still in
scheduler.finished_req_ids until the next schedule() clears it, so has_requests() is true, and
in-process nothing steps the engine again. One extra llm_engine.step() clears it; the
multiprocess engine loop takes that step by itself.

Needs: vLLM installed in this interpreter (it drives vllm.LLM in-process; no server).
Run:   python inproc_release_kv_after_sleep0.py MODEL
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# ---- common to every Python-API reproducer here; a self-test keeps it identical in each ----

SHOWS, BEHAVES, UNCLEAR = 1, 0, 2  # the exit codes
EXPERTS = ('MODEL must declare experts, or vLLM runs the ranks as independent engines: an MoE '
           'model, or a dense one with "num_local_experts": 2 added to its config.json')


class Unclear(Exception):  # noqa: N818 (the verdict it stands for)
    """No result a verdict can rest on (exit 2)."""


@dataclass(frozen=True)
class Case:
    name: str
    says: tuple[str, str]  # what vLLM says the behaviour is, and where (a file of the vllm package)
    expected: str
    run: Callable[[argparse.Namespace], tuple[bool, str]]  # -> (it shows, what was seen)
    env: tuple[tuple[str, str], ...] = ()  # set before vLLM is imported
    engines: int = 1  # data-parallel engines
    python_api: bool = True


def step(what: str, call: Callable[[], Any], show: bool = True) -> tuple[Any, Exception | None]:
    """One call of vLLM's API, printed with what it returned or raised and how long it took."""
    began = time.monotonic()
    try:
        value, raised = call(), None
    except Exception as exc:
        value, raised = None, exc
    got = f"raised {type(raised).__name__}: {raised}" if raised else repr(value) if show else "returned"
    print(f"  {what} -> {' '.join(got.split())[:400]} ({time.monotonic() - began:.2f} s)")
    return value, raised


def describe(cases: dict[str, Case]) -> dict[str, Any]:
    return {name: {**{k: v for k, v in vars(c).items() if k != "run"}, "env": dict(c.env)}
            for name, c in cases.items()}


def main(cases: dict[str, Case], shows: str, doc: str) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="the model to load (a local folder or a hub name)")
    parser.add_argument("--case", choices=list(cases), default=next(iter(cases)))
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=600.0, help="bound of the whole run in seconds")
    parser.add_argument("--describe", action="store_true", help="print the cases as JSON and exit")
    args = parser.parse_args()
    if args.describe:
        print(json.dumps(describe(cases), indent=2))
        return BEHAVES
    if not args.model:
        parser.error("the model to load is required")
    sys.stdout.reconfigure(line_buffering=True)
    case, verdicts = cases[args.case], {SHOWS: shows, BEHAVES: "behaves", UNCLEAR: "could not tell"}
    run = [*(f"{k}={v}" for k, v in case.env), "python", os.path.basename(sys.argv[0]), *sys.argv[1:]]
    print(f"case {case.name}: {' '.join(run)}"
          + f"\n  ({EXPERTS})" * (case.engines > 1))
    os.environ.update(case.env)

    def expire() -> None:  # a hung engine is a run that could not tell
        print(f"\nresult: exit {UNCLEAR} (could not tell: no verdict within {args.timeout:.0f} s)")
        os._exit(UNCLEAR)

    watchdog = threading.Timer(args.timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    try:
        import vllm

        print(f"vLLM {vllm.__version__}")
        shown, seen = case.run(args)
        code = SHOWS if shown else BEHAVES
    except (Unclear, ImportError) as exc:
        code, seen = UNCLEAR, str(exc)
    print(f"  vLLM says ({case.says[1]}): {case.says[0]}\n  expected: {case.expected}\n"
          f"  seen: {seen}\n\nresult: exit {code} ({verdicts[code]})")
    return code

# ---- end of the common part ----

SAYS = (  # what vLLM 0.32.0 says, and where (a file of the vllm package)
    "Requires a completed ``sleep(level=0)`` and resident executor memory.",
    "entrypoints/llm.py, LLM.release_kv_cache_memory docstring")
NO_DISCARD_ON_CPU = "Selective discard is not supported on CPU"


def release_after_sleep0(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import LLM, SamplingParams

    llm, failed = step("LLM(model, enforce_eager=True)", lambda: LLM(
        args.model, enforce_eager=True, max_model_len=args.max_model_len), show=False)
    if failed is not None:
        raise Unclear(f"the engine did not start: {failed!r}")
    _, failed = step("llm.generate(prompt)", lambda: llm.generate(
        "one request before the engine sleeps", SamplingParams(max_tokens=8), use_tqdm=False), show=False)
    if failed is None:
        _, failed = step("llm.sleep(level=0)", lambda: llm.sleep(level=0))
    if failed is not None:
        raise Unclear(f"generate() or sleep(level=0) failed: {failed!r}")
    _, raised = step("llm.release_kv_cache_memory()", llm.release_kv_cache_memory)
    step("llm.wake_up()", llm.wake_up)
    if raised is None or NO_DISCARD_ON_CPU in str(raised):
        return False, "release_kv_cache_memory() " + (
            "returned" if raised is None else f"raised {NO_DISCARD_ON_CPU!r}, as it must on CPU")
    return True, f"release_kv_cache_memory() raised {type(raised).__name__}: {raised}"


CASES = {"sleep0-release": Case(
    "sleep0-release", SAYS,
    f"release_kv_cache_memory() returns (on CPU: raises {NO_DISCARD_ON_CPU!r})", release_after_sleep0,
    env=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),))}

if __name__ == "__main__":
    sys.exit(main(CASES, "BUG", __doc__ or ""))
