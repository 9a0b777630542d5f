"""Catalog parsing is strict, and the catalog/test coverage check finds every mismatch."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from fixtures.spec.catalog import CatalogError, coverage_problems, load_catalog, parse_catalog

ROOT = Path(__file__).resolve().parent.parent

GOOD = """
behaviours:
  - id: area/thing-one
    must: The engine MUST do one thing.
    layer: contract
    source: spec
    status: required
  - id: area/thing-two
    must: The engine MUST do another thing.
    layer: mechanism
    source: spec
    status: {"0.32": tentative, "0.33": tentative, layered: required}
"""


def test_good_catalog_parses_with_per_profile_status():
    catalog = parse_catalog(GOOD)
    assert catalog["area/thing-two"].status_for("layered") == "required"
    assert catalog["area/thing-two"].status_for("0.32") == "tentative"
    assert len(catalog.digest) == 64


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (("layer: contract", "layer: contract\n    colour: red"), "unknown keys"),
        (("area/thing-two", "area/thing-one"), "duplicate ID"),
        (("MUST do one", "should do one"), "has no MUST"),
        (("area/thing-one", "Area Thing"), "IDs are lower-case"),
        (("status: required", "status: maybe"), "unknown status"),
        (('"0.33": tentative, ', ""), "must name every profile"),
        (("    source: spec\n    status: required", "    status: required"), "missing keys"),
    ],
)
def test_malformed_catalogs_are_refused(mutation, message):
    old, new = mutation
    with pytest.raises(CatalogError, match=message):
        parse_catalog(GOOD.replace(old, new, 1))


def test_coverage_problems_cover_every_kind_of_mismatch():
    catalog = parse_catalog(GOOD)
    problems = coverage_problems(
        catalog,
        {"t.py::no_id": [], "t.py::unknown": ["area/nope"], "t.py::a": ["area/thing-one"],
         "t.py::b": ["area/thing-one"], "t.py::two": ["area/thing-one", "area/thing-two"]},
        complete=True,
    )
    text = "\n".join(problems)
    assert "no_id: declares 0 behaviour IDs" in text
    assert "unknown: behaviour 'area/nope' is not in the catalog" in text
    assert "b: behaviour 'area/thing-one' over http is already tested by t.py::a" in text
    assert "two: declares 2 behaviour IDs" in text
    assert "catalog behaviour 'area/thing-two' has no http test" in text
    partial = coverage_problems(catalog, {"t.py::a": ["area/thing-one"]}, complete=False)
    assert partial == []


def test_transports_are_checked_one_test_each():
    text = GOOD.replace("    status: required\n",
                        "    status: required\n    transports: [http, offline]\n", 1)
    catalog = parse_catalog(text)
    assert catalog["area/thing-one"].transports == ("http", "offline")
    assert catalog["area/thing-two"].transports == ("http",)
    declared = {"t.py::a": ["area/thing-one"], "t.py::b": ["area/thing-two"],
                "t.py::b_offline": ["area/thing-two"]}
    problems = coverage_problems(catalog, declared, complete=True,
                                 transports={"t.py::b_offline": {"offline"}})
    assert "t.py::b_offline: drives 'area/thing-two' over offline, which the catalog does not " \
           "declare for it (transports: http)" in problems
    assert "catalog behaviour 'area/thing-one' has no offline test" in problems
    fine = coverage_problems(catalog, {"t.py::a": ["area/thing-one"], "t.py::a_off": ["area/thing-one"],
                                       "t.py::b": ["area/thing-two"]},
                             complete=True, transports={"t.py::a_off": {"offline"}})
    assert fine == []
    # A protocol test drives every transport of its behaviour, and claims each.
    both = coverage_problems(catalog, {"t.py::a": ["area/thing-one"], "t.py::b": ["area/thing-two"]},
                             complete=True, transports={"t.py::a": {"http", "offline"}})
    assert both == []
    twice = coverage_problems(catalog, {"t.py::a": ["area/thing-one"], "t.py::a_off": ["area/thing-one"],
                                        "t.py::b": ["area/thing-two"]}, complete=True,
                              transports={"t.py::a": {"http", "offline"}, "t.py::a_off": {"offline"}})
    assert twice == ["t.py::a_off: behaviour 'area/thing-one' over offline is already tested by t.py::a"]


@pytest.mark.parametrize("bad", ["transports: []", "transports: [carrier-pigeon]",
                                 "transports: [http, http]", "transports: http"])
def test_malformed_transports_are_refused(bad):
    text = GOOD.replace("    status: required\n", f"    status: required\n    {bad}\n", 1)
    with pytest.raises(CatalogError, match="transports"):
        parse_catalog(text)


def test_the_real_catalog_loads():
    catalog = load_catalog()
    assert all(b.must and b.source for b in catalog.behaviours.values())


def _collect(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                           "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def test_the_real_tree_matches_the_catalog():
    proc = _collect()
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("runner", ["MRV1", "MRV2"])
def test_dash_k_selects_exactly_one_runner(runner):
    proc = _collect("-k", runner)
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    assert ids and all(f"[{runner}-" in ln for ln in ids), proc.stdout
    other = "MRV2" if runner == "MRV1" else "MRV1"
    assert not any(other in ln for ln in ids)


def test_a_test_without_an_id_fails_collection():
    # In a dot-directory of conformance/, named on the command line: the collections of the
    # other tests here, which may run at the same time (-n 2), do not recurse into it.
    holder = Path(tempfile.mkdtemp(prefix=".selftest-no-id-", dir=ROOT / "conformance"))
    bad = holder / "test_selftest_no_id_tmp.py"
    bad.write_text(textwrap.dedent("""
        def test_nothing(engine):
            pass
    """))
    try:
        proc = _collect(str(bad))
    finally:
        shutil.rmtree(holder)
    assert proc.returncode != 0
    assert "test_nothing: declares 0 behaviour IDs" in proc.stdout + proc.stderr


def test_behaviour_selection_deselects_the_rest():
    proc = _collect("-k", "MRV1", "--lifecycle-behaviours", "custody/late-arrival,flags/")
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    assert ids and all("/custody/test_late_arrival.py" in ln or "/flags/" in ln for ln in ids), proc.stdout
    bad = _collect("--lifecycle-behaviours", "custody")
    assert bad.returncode != 0 and "names no catalogued behaviour" in bad.stdout + bad.stderr


def test_repeat_makes_rounds_of_every_instance():
    proc = _collect("-k", "MRV1 and awake_baseline", "--lifecycle-repeat", "3")
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    # Collection order is pytest's; the run itself orders rounds (plugin sort key).
    assert len(ids) == 3 and all(f"round{n}" in ln for n, ln in zip((1, 2, 3), sorted(ids), strict=True)), ids


def test_topology_tests_soak_their_own_number_of_rounds():
    proc = _collect("-k", "MRV1 and (awake_baseline or every_rank_follows)", "--lifecycle-repeat", "2",
                    "--lifecycle-topology-repeat", "1")
    ids = [ln for ln in proc.stdout.splitlines() if "::" in ln]
    single = [ln for ln in ids if "awake_baseline" in ln]
    topology = [ln for ln in ids if "every_rank_follows" in ln]
    assert len(single) == 2 and len(topology) == 1 and "round1" in topology[0], ids


def test_transport_selection_keeps_one_transport():
    offline = _collect("-k", "MRV1", "--lifecycle-transports", "offline")
    ids = [ln for ln in offline.stdout.splitlines() if "::" in ln]
    assert ids and all("-LLM-MP" in ln or "-AsyncLLM-MP" in ln for ln in ids), offline.stdout
    http = _collect("-k", "MRV1", "--lifecycle-transports", "http")
    ids = [ln for ln in http.stdout.splitlines() if "::" in ln]
    assert ids and not any("LLM-MP" in ln for ln in ids)
    bad = _collect("--lifecycle-transports", "carrier-pigeon")
    assert bad.returncode != 0 and "--lifecycle-transports" in bad.stdout + bad.stderr
