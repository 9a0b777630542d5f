"""A trainer-side user's own sync path (`--lifecycle-weight-sync MODULE:NAME`, docs/weight-sync.md).

NAME is a callable taking one `SyncTarget`, or an object with such a `sync` method and,
optionally, `launch_args` every server the suite starts then carries (a framework's
`--worker-extension-cls`, say). It runs in the pytest process while the engine is paused (or
asleep with its weights awake) and returns once every engine has the checkpoint; it raises
`SyncRefused` when the engine refused or failed the sync (a failure), and anything else it
raises is a harness error. Plain Python: the suite's process imports it, and so may a user's.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Flags the suite sets on every server that a sync path may not replace: the native-session
# behaviours push through the suite's own backend.
RESERVED_FLAGS = ("--weight-transfer-config",)


@dataclass(frozen=True)
class SyncTarget:
    """One sync to perform: load `checkpoint` into every engine of the server at `url`."""

    url: str  # base URL of the server (dev mode on: /collective_rpc and the weight routes answer)
    checkpoint: Path  # a Hugging Face folder: config.json and model.safetensors
    weights_file: Path  # the checkpoint's safetensors file
    label: str  # "A" (the served model) or "B" (same architecture, other weights)
    version: str | None  # the weight version to commit, where the path has versions
    engines: int  # data-parallel engines behind the URL (one worker each)


class SyncRefused(Exception):  # noqa: N818 (the name says what the engine did)
    """Raised by a sync path when the engine refused or failed the sync."""


@dataclass(frozen=True)
class SyncPath:
    """A resolved `--lifecycle-weight-sync` value."""

    spec: str
    sync: Callable[[SyncTarget], object]
    launch_args: tuple[str, ...] = ()


def load_sync_path(spec: str) -> SyncPath:
    """MODULE:NAME to its sync callable and launch args; ValueError naming what is wrong."""
    module_name, colon, name = spec.partition(":")
    if not colon or not module_name or not name:
        raise ValueError(f"{spec!r} is not MODULE:NAME (e.g. mypkg.sync:push_weights)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # any import failure is the user's to see, with its cause
        raise ValueError(f"cannot import {module_name!r} from the suite's interpreter: "
                         f"{type(exc).__name__}: {exc}") from None
    obj: object = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{module_name!r} has no attribute {name!r}")
        obj = getattr(obj, part)
    method = getattr(obj, "sync", None)
    sync = method if callable(method) else obj
    if not callable(sync):
        raise ValueError(f"{spec} is neither callable nor has a callable 'sync'")
    raw_args = getattr(obj, "launch_args", ()) if sync is method else ()
    if isinstance(raw_args, str) or not all(isinstance(a, str) for a in raw_args):
        raise ValueError(f"{spec}.launch_args must be a sequence of strings, got {raw_args!r}")
    args = tuple(raw_args)
    reserved = [a for a in args if a.split("=", 1)[0] in RESERVED_FLAGS]
    if reserved:
        raise ValueError(f"{spec}.launch_args sets {', '.join(reserved)}: the suite's own backend "
                         f"must stay configured (its session behaviours push through it)")
    return SyncPath(spec, sync, args)


def _flag_spans(args: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Arguments as (flag, [flag and its values]) runs; a leading value gets flag ''."""
    spans: list[tuple[str, list[str]]] = []
    for arg in args:
        if arg.startswith("--"):
            spans.append((arg.split("=", 1)[0], [arg]))
        elif spans:
            spans[-1][1].append(arg)
        else:
            spans.append(("", [arg]))
    return spans


def merge_launch_args(base: Sequence[str], extra: Sequence[str]) -> tuple[str, ...]:
    """The suite's arguments with a sync path's added; a flag both set takes the sync path's
    value (e.g. its own --worker-extension-cls in place of the suite's)."""
    ours = _flag_spans(extra)
    replaced = {flag for flag, _ in ours if flag}
    kept = [part for flag, span in _flag_spans(base) if flag not in replaced for part in span]
    return tuple(kept + [part for _, span in ours for part in span])
