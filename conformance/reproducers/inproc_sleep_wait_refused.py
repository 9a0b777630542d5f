#!/usr/bin/env python3
"""[Feature]: in-process LLM.sleep(mode="wait") should drain the request in flight instead of raising

With the engine core in the caller's process, LLM.sleep(level=1, mode="wait") raises
ValueError("'wait' pause mode is not supported in inproc-engine mode")
(v1/engine/core_client.py InprocClient.sleep): the request in flight is not drained before the
offload. The drain is what open PR #56754 adds. A tentative behaviour: this script shows
whether a release drains in-process yet.

Findings (conformance/findings.yaml, tentative): custody/inproc-drain-before-offload.
Needs: vLLM installed in this interpreter (the script drives vllm.LLM in-process; no server).
Run:   python inproc_sleep_wait_refused.py MODEL
Exit:  1 the sleep is refused (or loses the request), 0 it drains, 2 could not tell.
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
    "custody/inproc-drain-before-offload": (
        "With the engine core in the caller's process (LLM, VLLM_ENABLE_V1_MULTIPROCESSING=0), "
        "sleep(level=1, mode=\"wait\") MUST drain the request in flight before it returns: the "
        "request finishes in full with the output of an uninterrupted run, a waiting request "
        "produces nothing until the wake and then runs in full."),
}
PROMPT = "a request in flight when the engine is put to sleep"
MAX_TOKENS = 8


def sleep_wait(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import LLM, SamplingParams

    llm, failed = step("LLM(model, enforce_eager=True)", lambda: LLM(
        args.model, enforce_eager=True, max_model_len=args.max_model_len), show=False)
    if failed is not None:
        raise InconclusiveError(f"the engine did not start: {failed!r}")
    engine = llm.llm_engine
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0, ignore_eos=True)
    step("llm.llm_engine.add_request('in-flight', ...)",
         lambda: engine.add_request("in-flight", PROMPT, params))
    outputs = [*(step("llm.llm_engine.step()", engine.step, show=False)[0] or [])]
    _, refused = step("llm.sleep(level=1, mode='wait')", lambda: llm.sleep(level=1, mode="wait"))
    if refused is not None:
        return True, f"sleep(level=1, mode='wait') raised {type(refused).__name__}: {refused}"
    asleep, _ = step("llm.llm_engine.is_sleeping()", engine.is_sleeping)
    step("llm.wake_up()", llm.wake_up)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(o.finished for o in outputs):
        outputs += engine.step() or []
    done = [o for o in outputs if o.finished]
    tokens = len(done[-1].outputs[0].token_ids) if done else 0
    say(f"  the request in flight: {'finished' if done else 'not finished'} with {tokens} tokens")
    drained = asleep is True and tokens == MAX_TOKENS
    return not drained, (f"sleep(level=1, mode='wait') returned, is_sleeping {asleep}; the request "
                         f"in flight {'finished' if done else 'did not finish'} with {tokens} of "
                         f"{MAX_TOKENS} tokens")


CASES = {
    "sleep-wait": Case("sleep-wait", ("custody/inproc-drain-before-offload",),
                       "sleep(level=1, mode='wait') returns asleep, and the request in flight "
                       f"finishes with its {MAX_TOKENS} tokens", sleep_wait,
                       env=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),)),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
