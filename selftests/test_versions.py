"""Version-aware catalog: a behaviour whose API the target's release lacks is not applicable,
never a failure and never a pass (issue 16)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fixtures.reporting import results
from fixtures.spec.catalog import CatalogError, load_catalog, parse_catalog

ENTRY = """
behaviours:
  - id: area/thing-one
    must: The engine MUST do one thing.
    layer: contract
    source: spec
    status: required
    needs: {api: "JSON bodies from /sleep and /wake_up", since: "0.32.0"}
"""


@pytest.mark.parametrize(("release", "applies"), [
    ("0.32.0", True), ("0.32.0+cpu", True), ("0.33.1rc1", True), ("0.31.0", False), ("0.27.0", False),
    ("0.32.0.dev3", False),  # a development build before the release does not have it yet
])
def test_a_behaviour_applies_from_the_release_its_api_arrived(release, applies):
    behaviour = parse_catalog(ENTRY)["area/thing-one"]
    reason = behaviour.applicable(release)
    assert (reason is None) == applies
    if reason:
        assert reason == (f"not applicable: needs JSON bodies from /sleep and /wake_up (vLLM 0.32.0 and "
                          f"later); the target has {release}")


@pytest.mark.parametrize(("needs", "message"), [
    ('needs: {api: "x"}', "exactly 'api' and 'since'"),
    ('needs: {api: "x", since: "soon"}', "is not a vLLM version"),
    ('needs: "0.32"', "exactly 'api' and 'since'"),
])
def test_needs_is_strict(needs, message):
    text = ENTRY.replace('needs: {api: "JSON bodies from /sleep and /wake_up", since: "0.32.0"}', needs)
    with pytest.raises(CatalogError, match=message):
        parse_catalog(text)


def _skipped(reason: str):
    return SimpleNamespace(when="setup", passed=False, failed=False, skipped=True,
                           longrepr=("x.py", 1, f"Skipped: {reason}"))


def test_not_applicable_is_its_own_outcome_and_never_fails_the_verdict():
    rep = _skipped("not applicable: needs /pause (vLLM 0.12.0 and later); the target has 0.11.0")
    assert results.outcome(rep) == "not-applicable"
    assert results.message(rep).startswith("not applicable: needs /pause")
    assert results.outcome(_skipped("variant MRV2 needs Triton")) == "skip"
    tally = dict.fromkeys(results.SEVERITY, 0) | {"pass": 2, "not-applicable": 3}
    line = results.verdict_line(tally)
    assert line.startswith("CONFORMANCE PASS") and "3 not applicable to this release" in line


def test_every_catalogued_release_is_a_version():
    for behaviour in load_catalog().behaviours.values():
        assert behaviour.applicable("99.0.0") is None, behaviour.id
