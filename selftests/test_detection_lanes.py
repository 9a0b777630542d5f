"""Detection cases side by side: which run alone, which share the machine one core each, and
that every case's run (or its crash) reaches the test waiting on it."""

from __future__ import annotations

import ast
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from detection.cases import LONGEST, Case, cases, engines_needed, schedule
from detection.lanes import Lanes
from fixtures.spec.catalog import load_catalog

CATALOG = load_catalog()


def case(name: str, *behaviours: str) -> Case:
    return Case(name, None, behaviours, ())


def test_a_case_on_a_dp_topology_needs_a_core_per_engine():
    assert engines_needed(case("a", "topology/quiescent-after-pause"), CATALOG) == 2
    assert engines_needed(case("b", "flags/partial-wake", "flags/awake-baseline"), CATALOG) == 1
    # api2 is one engine behind two API servers: one core is enough
    assert engines_needed(case("c", "topology/admission-every-frontend"), CATALOG) == 1
    # A behaviour on one engine and on dp2: the case's own topologies decide.
    assert engines_needed(case("d", "custody/late-arrival"), CATALOG) == 2
    # tp2 is one engine of two workers, each bound to a core of its own.
    tp2 = Case("f", None, ("weights/sync-reaches-every-rank",), (), topologies=("tp2",))
    assert engines_needed(tp2, CATALOG) == 2
    single = Case("e", None, ("custody/late-arrival",), (), topologies=("single",))
    assert engines_needed(single, CATALOG) == 1
    assert single.pytest_args()[:6] == ["--lifecycle-behaviours", "custody/late-arrival",
                                        "--lifecycle-transports", "http",
                                        "--lifecycle-topologies", "single"]


def test_dp_cases_run_alone_first_and_the_rest_side_by_side_in_order():
    listed = [case("s1", "flags/partial-wake"), case("dp", "topology/every-rank-follows"),
              Case("s2", None, ("custody/late-arrival",), (), topologies=("single",))]
    plan = schedule(listed, CATALOG, 2)
    assert [c.name for c in plan.alone] == ["dp"]
    assert [c.name for c in plan.side_by_side] == ["s1", "s2"] and plan.lanes == 2
    one = schedule(listed, CATALOG, 1)
    assert [c.name for c in one.alone] == ["s1", "dp", "s2"] and one.side_by_side == ()
    with pytest.raises(ValueError, match="lanes must be at least 1"):
        schedule(listed, CATALOG, 0)


def test_every_real_case_is_placed_once():
    real = cases()
    plan = schedule(real, CATALOG, 2)
    assert sorted(c.name for c in (*plan.alone, *plan.side_by_side)) == sorted(c.name for c in real)
    assert {c.name for c in plan.alone} >= {"dp-pause-completes-before-consensus",
                                             "dp-keep-sync-and-partial-wake", "dp-wake-and-entry-0",
                                             "dp-stale-wave-and-init", "stock-under-layered-dp2",
                                             "tp2-reads-entry-0"}
    # The single-engine custody faults stay on one core although their behaviours run on dp2 too,
    # and so does stock vLLM's one-engine part under the layered profile.
    assert {c.name for c in plan.side_by_side} >= {"keep-aborts-and-lora", "partial-wake-and-drain",
                                                   "wake-and-admission", "preview-layered",
                                                   "stock-under-layered-one-engine"}
    # The longest side-by-side cases lead, each a case that exists (a renamed one would drop out).
    assert [c.name for c in plan.side_by_side[:len(LONGEST)]] == list(LONGEST)


def test_the_smoke_is_one_side_by_side_case_per_transport():
    """What .ci/run runs of detection: every transport's fault arming on the real engine, in
    one round of the lanes (no case alone on the machine)."""
    from detection.cases import SMOKE

    real = {c.name: c for c in cases()}
    chosen = [real[name] for name in SMOKE]  # a renamed case fails here, not in CI
    assert sorted(c.transport for c in chosen) == ["http", "offline"]
    plan = schedule(chosen, CATALOG, 2)
    assert plan.alone == () and all("," in str(c.fault) for c in chosen)


def test_the_smoke_option_selects_the_smoke_cases():
    from detection.cases import SMOKE

    proc = subprocess.run([sys.executable, "-m", "pytest", "detection", "--collect-only", "-q",
                           "-p", "no:cacheprovider", "--detection-smoke"],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                          timeout=120, check=False)
    ids = [ln.split("[", 1)[1].rstrip("]") for ln in proc.stdout.splitlines() if "::" in ln]
    assert sorted(ids) == sorted(SMOKE), proc.stdout + proc.stderr


def _behaviour_tests() -> dict[str, list[tuple[str, bool]]]:
    """Each conformance test's behaviour (named by a literal) -> its tests, each as (its file from
    the conformance directory: the order pytest collects them in, whether it is marked to run
    last)."""
    root = Path(__file__).resolve().parent.parent / "conformance"
    found: dict[str, list[tuple[str, bool]]] = {}
    for path in root.rglob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            ids = [d.args[0].value for d in node.decorator_list
                   if isinstance(d, ast.Call) and ast.unparse(d.func) == "pytest.mark.behaviour"
                   and d.args and isinstance(d.args[0], ast.Constant)]
            last = "pytest.mark.ends_shared_server_on_failure" in map(ast.unparse, node.decorator_list)
            for bid in ids:
                found.setdefault(bid, []).append((path.relative_to(root).as_posix(), last))
    return found


def _marked_last() -> dict[str, bool]:
    """Each behaviour -> whether every test of it is marked to run last."""
    return {bid: all(last for _, last in tests) for bid, tests in _behaviour_tests().items()}


def test_a_wedging_fault_merged_with_others_runs_its_tests_last_on_their_server():
    """A merged case saves a start only if its wedging member's tests (a fault given a short
    request timeout because it wedges the engine) run after the other members' tests."""
    from detection.cases import _EXTRA_ARGS
    from vllm_lifecycle.faults.registry import FAULTS

    marked = _marked_last()
    assert marked["weights/sync-reaches-every-rank"] is False  # the scan sees an unmarked test
    merged = [c for c in cases() if "," in str(c.fault)]
    wedging = {f for c in merged for f in str(c.fault).split(",") if f in _EXTRA_ARGS}
    assert wedging == {"dp-wake-reaches-one-rank", "dp-stale-wave-wakes-paused"}
    for fault in wedging:
        for bid in FAULTS[fault].breaks:
            assert marked[bid], f"{fault}: the tests of {bid} are not marked to run last"


def test_a_fault_that_kills_the_engine_shares_a_case_only_with_tests_that_run_before_its_own():
    """Its catch leaves the engine dead: a member's test after it would meet a dead server."""
    from detection.cases import KILLS_THE_ENGINE
    from vllm_lifecycle.faults.registry import FAULTS

    tests, marked = _behaviour_tests(), _marked_last()
    merged = [c for c in cases() if any(k in str(c.fault).split(",") for k in KILLS_THE_ENGINE)]
    assert merged, "no merged case holds a fault that kills the engine: this check checks nothing"
    for case in merged:
        killers = [f for f in str(case.fault).split(",") if f in KILLS_THE_ENGINE]
        own = {b for k in killers for b in FAULTS[k].breaks}
        others = [b for b in case.behaviours if b not in own]
        assert not [b for b in others if marked[b]], f"{case.name}: a member's test runs last"
        assert (max(f for b in others for f, _ in tests[b])
                < min(f for b in own for f, _ in tests[b])), case.name


def test_lanes_run_alone_cases_on_every_core_then_the_rest_one_core_each():
    seen: list[tuple[str, tuple[int, ...] | None]] = []
    running = []
    overlap = threading.Event()

    def run(c, cores, keep):
        running.append(c.name)
        if len(running) > 1 and cores is None:
            overlap.set()  # an alone case must never share the machine
        seen.append((c.name, cores))
        time.sleep(0.05)
        running.remove(c.name)
        if c.name == "boom":
            raise RuntimeError("child wrote no results")
        return [{"case": c.name}], Path(c.name)

    plan = schedule([case("s1", "flags/partial-wake"), case("dp", "topology/every-rank-follows"),
                     case("boom", "flags/partial-wake"), case("s3", "flags/partial-wake")], CATALOG, 2)
    lanes = Lanes(plan, [0, 1], run)
    lanes.start()
    assert lanes.result("s1") == ([{"case": "s1"}], Path("s1"))
    with pytest.raises(RuntimeError, match="child wrote no results"):
        lanes.result("boom")
    lanes.stop()
    assert seen[0] == ("dp", None) and not overlap.is_set()
    assert {cores for name, cores in seen[1:]} <= {(0,), (1,)} and len(seen) == 4


def test_a_stopped_session_starts_no_new_case():
    started = threading.Event()
    release = threading.Event()

    def run(c, cores, keep):
        started.set()
        release.wait(5)
        return [], Path(c.name)

    plan = schedule([case("first", "flags/partial-wake"), case("second", "flags/partial-wake")],
                    CATALOG, 1)
    lanes = Lanes(plan, [0], run)
    lanes.start()
    started.wait(5)
    stopper = threading.Thread(target=lanes.stop)
    stopper.start()
    time.sleep(0.1)
    release.set()
    stopper.join(10)
    assert lanes.result("first") == ([], Path("first"))
    with pytest.raises(RuntimeError, match="not run, the session was stopped"):
        lanes.result("second")
