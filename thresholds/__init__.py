"""Numeric limits, one file for the whole suite (thresholds.yaml beside this module).

Limits resolve against a context (platform, runner, model size): the most specific override
wins. The effective set and its hash are printed at the start of a run and recorded in its
results, with any command-line override.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

THRESHOLDS_PATH = Path(__file__).with_name("thresholds.yaml")
COMPARATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
CONTEXT_KEYS = ("platform", "runner", "model_size")
DEFAULT_CONTEXT = {"platform": "cpu", "runner": "MRV1", "model_size": "tiny"}


class ThresholdError(ValueError):
    pass


@dataclass(frozen=True)
class Limit:
    behaviour: str
    name: str
    comparator: str
    limit: float
    unit: str
    reason: str
    overridden: bool = False

    def judge(self, observed: float) -> Measurement:
        ok = COMPARATORS[self.comparator](observed, self.limit)
        return Measurement(self.behaviour, self.name, float(observed), self.limit, self.comparator,
                           self.unit, ok)

    def check(self, observed: float) -> str | None:
        """None within the limit, else a message quoting observation, limit and reason."""
        measurement = self.judge(observed)
        return None if measurement.ok else f"{measurement.describe()} ({self.reason})"


@dataclass(frozen=True)
class Measurement:
    """One thresholded observation, as the results file records it."""

    behaviour: str
    name: str
    observed: float
    limit: float
    comparator: str
    unit: str
    ok: bool

    def describe(self) -> str:
        margin = self.observed - self.limit
        return (f"{self.behaviour} {self.name}: observed {self.observed:g} {self.unit}, limit "
                f"{self.comparator} {self.limit:g} ({'within' if self.ok else 'beyond'} by "
                f"{abs(margin):g})")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _specificity(when: Mapping[str, str], context: Mapping[str, str]) -> int:
    if any(context.get(k) != v for k, v in when.items()):
        return -1
    return len(when)


def parse_limits(text: str, context: Mapping[str, str] | None = None,
                 overrides: Mapping[str, float] | None = None) -> dict[str, Limit]:
    """The effective limits for a context, keyed 'behaviour:name'."""
    ctx = {**DEFAULT_CONTEXT, **(context or {})}
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not isinstance(data.get("limits"), dict):
        raise ThresholdError("thresholds file needs a 'limits' mapping")
    if not isinstance(data.get("policy"), dict):
        raise ThresholdError("thresholds file needs a 'policy' mapping (triage policy)")
    limits: dict[str, Limit] = {}
    for behaviour, entries in data["limits"].items():
        for name, entry in entries.items():
            comparator = entry.get("comparator")
            if comparator not in COMPARATORS:
                raise ThresholdError(f"{behaviour}:{name}: unknown comparator {comparator!r}")
            for field in ("limit", "unit", "reason"):
                if field not in entry:
                    raise ThresholdError(f"{behaviour}:{name}: missing {field!r}")
            value, reason = float(entry["limit"]), " ".join(str(entry["reason"]).split())
            best = 0
            for override in entry.get("overrides") or []:
                when = override.get("when") or {}
                if set(when) - set(CONTEXT_KEYS):
                    raise ThresholdError(f"{behaviour}:{name}: override keys must be {CONTEXT_KEYS}")
                rank = _specificity(when, ctx)
                if rank > best:
                    best, value = rank, float(override["limit"])
                    reason = " ".join(str(override.get("reason", reason)).split())
            limits[f"{behaviour}:{name}"] = Limit(behaviour, name, comparator, value,
                                                  str(entry["unit"]), reason)
    for key, value in (overrides or {}).items():
        if key not in limits:
            raise ThresholdError(f"threshold override names unknown limit {key!r}")
        old = limits[key]
        limits[key] = Limit(old.behaviour, old.name, old.comparator, float(value), old.unit,
                            f"overridden on the command line (file: {old.limit:g})", True)
    return limits


def parse_overrides(spec: str | None) -> dict[str, float]:
    """'behaviour:name=value[,behaviour:name=value]' to a mapping; errors name the bad item."""
    found: dict[str, float] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, raw = item.partition("=")
        if not sep or ":" not in key:
            raise ThresholdError(f"threshold override {item!r} is not behaviour:name=value")
        try:
            found[key.strip()] = float(raw)
        except ValueError:
            raise ThresholdError(f"threshold override {item!r}: {raw!r} is not a number") from None
    return found


def load_limits(context: Mapping[str, str] | None = None,
                overrides: Mapping[str, float] | None = None,
                path: Path = THRESHOLDS_PATH) -> dict[str, Limit]:
    return parse_limits(path.read_text(), context, overrides)


def limits_digest(limits: Mapping[str, Limit]) -> str:
    """Hash of the effective limits (what a certified run is held to)."""
    blob = json.dumps({k: [v.comparator, v.limit, v.unit] for k, v in sorted(limits.items())})
    return hashlib.sha256(blob.encode()).hexdigest()


def file_digest(path: Path = THRESHOLDS_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def policy(path: Path = THRESHOLDS_PATH) -> dict[str, str]:
    data = yaml.safe_load(path.read_text())
    return {k: " ".join(str(v).split()) for k, v in data["policy"].items()}
