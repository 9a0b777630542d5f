#!/usr/bin/env python3
"""[Feature]: vllm.LLM should offer pause_generation() and resume_generation(), as AsyncLLM does

vllm.LLM has no pause_generation before PR #53082: its documented offline pause is
sleep(level=0) plus wake_up(tags=["scheduling"]). A tentative behaviour: this script shows
whether a release offers it yet.

Findings (conformance/findings.yaml, tentative): flags/llm-pause-resume.
Needs: vLLM installed in this interpreter (the script drives vllm.LLM in-process; no server).
Run:   python llm_has_no_pause_generation.py MODEL
Exit:  1 LLM has no pause_generation (or it misbehaves), 0 it pauses and resumes, 2 could not tell.
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
    "flags/llm-pause-resume": (
        "vllm.LLM MUST offer pause_generation(mode=M) and resume_generation() (PR #53082); after a "
        "pause is_sleeping MUST read true, and after the resume false."),
}


def pause_resume(args: argparse.Namespace) -> tuple[bool, str]:
    from vllm import LLM

    if not hasattr(LLM, "pause_generation"):
        say("  hasattr(vllm.LLM, 'pause_generation') -> False")
        return True, "vllm.LLM has no pause_generation: llm.pause_generation() raises AttributeError"
    llm, failed = step("LLM(model, enforce_eager=True)", lambda: LLM(
        args.model, enforce_eager=True, max_model_len=args.max_model_len), show=False)
    if failed is not None:
        raise InconclusiveError(f"the engine did not start: {failed!r}")
    _, paused = step("llm.pause_generation(mode='keep')", lambda: llm.pause_generation(mode="keep"))
    asleep, _ = step("llm.llm_engine.is_sleeping()", llm.llm_engine.is_sleeping)
    _, resumed = step("llm.resume_generation()", llm.resume_generation)
    awake, _ = step("llm.llm_engine.is_sleeping()", llm.llm_engine.is_sleeping)
    ok = paused is None and resumed is None and asleep is True and awake is False
    return not ok, (f"pause_generation {'raised ' + repr(paused) if paused else 'returned'}, "
                    f"is_sleeping {asleep}; resume_generation "
                    f"{'raised ' + repr(resumed) if resumed else 'returned'}, is_sleeping {awake}")


CASES = {
    "pause-resume": Case("pause-resume", ("flags/llm-pause-resume",),
                         "pause_generation(mode='keep') returns and is_sleeping reads true; "
                         "resume_generation() returns and is_sleeping reads false", pause_resume),
}

if __name__ == "__main__":
    sys.exit(main(CASES, MUST, __doc__ or ""))
