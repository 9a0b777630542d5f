#!/usr/bin/env python3
"""[Bug]: DP: a request arriving while paused leaves the engines running: wait_for_requests_to_drain times out

With data-parallel engines paused by pause_generation(mode="abort"), a request that arrives
makes the DP coordinator mark the engines running when it forwards the request's
START_DP_WAVE; the paused engines drop it, so no wave_complete ever clears the mark,
dp_engines_running() stays true and AsyncLLM.wait_for_requests_to_drain() times out;
resume_generation() clears it. vLLM 0.27.0 and 0.28.0 set engines_running = True in
DPCoordinatorProc.process_input_socket; 0.29.0 no longer does
(https://github.com/vllm-project/vllm/pull/51481).

Needs: vLLM installed in this interpreter (it drives AsyncLLM in-process; no server), and a
MODEL whose config declares experts, or vLLM runs the ranks as independent engines and no
coordinator: an MoE model, or a copy of a small dense model with "num_local_experts": 2 added
to its config.json.
Run:   python dp_drain_latched_after_late_request.py MODEL
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
    "engines_running is only set from the engines' own notifications; a paused engine discards "
    "START_DP_WAVE, so sending it is not evidence that the engines are running.",
    "v1/engine/coordinator.py, DPCoordinatorProc.process_input_socket comment (the fix)")
DRAIN_TIMEOUT_S = 30
# A drain of up to ~5 s is normal: the DP client predicts "running" when it forwards the late
# request's wake, until the coordinator's next idle publication (every 5 s).
DRAIN_LIMIT_S = 15.0


async def late_request(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import SamplingParams
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    engine, failed = step("AsyncLLM(model, data_parallel_size=2, enforce_eager=True)",
                          lambda: AsyncLLM.from_engine_args(AsyncEngineArgs(
                              model=args.model, data_parallel_size=2, enforce_eager=True,
                              max_model_len=args.max_model_len)), show=False)
    if failed is not None:
        raise Unclear(f"the engines did not start: {failed!r}")
    try:
        print("  await engine.pause_generation(mode='abort')")
        await engine.pause_generation(mode="abort")

        async def consume() -> int:
            tokens = 0
            params = SamplingParams(max_tokens=8, ignore_eos=True)
            async for out in engine.generate("arrives while paused", params, request_id="late"):
                tokens = len(out.outputs[0].token_ids)
            return tokens

        print("  engine.generate(prompt, request_id='late') (not awaited: it arrives while paused)")
        late = asyncio.ensure_future(consume())
        await asyncio.sleep(1.0)
        began, raised = time.monotonic(), None
        try:
            await engine.wait_for_requests_to_drain(drain_timeout=DRAIN_TIMEOUT_S)
        except Exception as exc:
            raised = exc
        seconds = time.monotonic() - began
        drained = f"raised {type(raised).__name__}: {raised}" if raised else "returned"
        print(f"  await engine.wait_for_requests_to_drain(drain_timeout={DRAIN_TIMEOUT_S}) -> {drained} "
              f"({seconds:.1f} s)")
        print("  await engine.resume_generation()")
        await engine.resume_generation()
        tokens = await asyncio.wait_for(late, 120)
    finally:
        engine.shutdown()
    return not (raised is None and seconds <= DRAIN_LIMIT_S), (
        f"wait_for_requests_to_drain() {drained} after {seconds:.1f} s; the late request then finished "
        f"with {tokens} tokens")


CASES = {"late-request": Case(
    "late-request", SAYS,
    f"wait_for_requests_to_drain() returns within {DRAIN_LIMIT_S:.0f} s",
    lambda args: asyncio.run(late_request(args)), engines=2)}

if __name__ == "__main__":
    sys.exit(main(CASES, "BUG", __doc__ or ""))
