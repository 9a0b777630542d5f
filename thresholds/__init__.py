"""Numeric limits, one file for the whole suite (thresholds.yaml beside this module)."""

from __future__ import annotations

import hashlib
import operator
from dataclasses import dataclass
from pathlib import Path

import yaml

THRESHOLDS_PATH = Path(__file__).with_name("thresholds.yaml")
_COMPARATORS = {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}


@dataclass(frozen=True)
class Limit:
    behaviour: str
    name: str
    comparator: str
    limit: float
    unit: str
    reason: str

    def check(self, observed: float) -> str | None:
        """None when the observation is within the limit, else a message quoting both."""
        if _COMPARATORS[self.comparator](observed, self.limit):
            return None
        return (f"{self.behaviour} {self.name}: observed {observed:g} {self.unit}, limit "
                f"{self.comparator} {self.limit:g} {self.unit} ({self.reason})")


def load_limits(path: Path = THRESHOLDS_PATH) -> dict[tuple[str, str], Limit]:
    data = yaml.safe_load(path.read_text())
    limits = {}
    for behaviour, entries in data["limits"].items():
        for name, entry in entries.items():
            if entry["comparator"] not in _COMPARATORS:
                raise ValueError(f"{behaviour}/{name}: unknown comparator {entry['comparator']!r}")
            limits[(behaviour, name)] = Limit(behaviour, name, entry["comparator"],
                                              float(entry["limit"]), entry["unit"],
                                              " ".join(entry["reason"].split()))
    return limits


def limit(behaviour: str, name: str) -> Limit:
    return load_limits()[(behaviour, name)]


def digest(path: Path = THRESHOLDS_PATH) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
