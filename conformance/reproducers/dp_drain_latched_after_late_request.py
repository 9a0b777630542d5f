#!/usr/bin/env python3
"""[Bug]: DP: a request arriving while paused leaves the engines running: wait_for_requests_to_drain times out

With data-parallel engines paused by pause_generation(mode="abort"), a request that arrives
makes the DP coordinator mark the engines running when it forwards the request's
START_DP_WAVE; the paused engines drop it, so no wave_complete ever clears the mark,
dp_engines_running() stays true and AsyncLLM.wait_for_requests_to_drain() times out;
resume_generation() clears it (RFC #51476 section 1, fixed by vLLM #51481: 0.27.0 and 0.28.0
set engines_running = True in DPCoordinatorProc.process_input_socket, 0.29.0 no longer does).

Findings (conformance/findings.yaml): topology/drain-after-late-request.
Needs: vLLM installed in this interpreter (the script drives AsyncLLM in-process; no server),
and a model whose config declares experts (vLLM runs the DP engine class only for those).
Run:   python dp_drain_latched_after_late_request.py MOE_MODEL
Exit:  1 the bug shows, 0 the engine behaves, 2 could not tell.
"""

from __future__ import annotations

import argparse
import asyncio
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
    "topology/drain-after-late-request": (
        "With several data-parallel engines, once pause_generation(mode=\"abort\") has returned and "
        "a request has arrived while paused, AsyncLLM.wait_for_requests_to_drain() MUST return "
        "within its limit \u2014 the engines are paused, so none may be reported running \u2014 in "
        "each of three rounds in a row; after resume_generation() the request that arrived while "
        "paused (where the profile holds it) and a fresh one MUST finish in full within their "
        "limit."),
}
DRAIN_TIMEOUT_S = 30
# A drain of up to ~5 s is normal: the DP client predicts "running" when it forwards the late
# request's wake, until the coordinator's next idle publication (every 5 s).
DRAIN_LIMIT_S = 15.0
PROMPT = "A request that reaches the data-parallel engines while they are paused"


async def late_request(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    engine, failed = step("AsyncLLM(model, data_parallel_size=2, enforce_eager=True)",
                          lambda: AsyncLLM.from_engine_args(AsyncEngineArgs(
                              model=args.model, data_parallel_size=2, enforce_eager=True,
                              max_model_len=args.max_model_len)), show=False)
    if failed is not None:
        raise InconclusiveError(f"the engines did not start: {failed!r}")
    try:
        say("  await engine.pause_generation(mode='abort')")
        await engine.pause_generation(mode="abort")

        async def consume() -> int:
            tokens = 0
            async for out in engine.generate(PROMPT, SamplingParams(max_tokens=8, ignore_eos=True),
                                             request_id="late"):
                tokens = len(out.outputs[0].token_ids)
            return tokens

        say("  engine.generate(prompt, request_id='late') (not awaited: it arrives while paused)")
        late = asyncio.ensure_future(consume())
        await asyncio.sleep(1.0)
        began = time.monotonic()
        try:
            await engine.wait_for_requests_to_drain(drain_timeout=DRAIN_TIMEOUT_S)
            raised = None
        except Exception as exc:
            raised = exc
        seconds = time.monotonic() - began
        drained = (f"returned after {seconds:.1f} s" if raised is None else
                   f"raised {type(raised).__name__}: {raised} after {seconds:.1f} s")
        say(f"  await engine.wait_for_requests_to_drain(drain_timeout={DRAIN_TIMEOUT_S}) -> {drained}")
        say("  await engine.resume_generation()")
        await engine.resume_generation()
        tokens = await asyncio.wait_for(late, 120)
        say(f"  the late request finished with {tokens} tokens")
    finally:
        engine.shutdown()
    ok = raised is None and seconds <= DRAIN_LIMIT_S
    return not ok, (f"wait_for_requests_to_drain() {drained}; the late request then finished with "
                    f"{tokens} tokens")


def run(args: argparse.Namespace) -> tuple[bool, str]:
    return asyncio.run(late_request(args))


CASES = {
    "late-request": Case("late-request", ("topology/drain-after-late-request",),
                         f"wait_for_requests_to_drain() returns within {DRAIN_LIMIT_S:.0f} s",
                         run, engines=2),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
