"""pytest-xdist: device sets per worker, server-config groups, and the merge of every worker's
records into one run (pure functions on hand-made values)."""

from __future__ import annotations

import pytest

from fixtures.errors import ConfigError
from fixtures.launching import workers
from fixtures.reporting import results


def team(n: int) -> list[workers.Worker]:
    return [w for i in range(n) if (w := workers.worker_of({"workerid": f"gw{i}", "workercount": n}))]


def test_a_plain_run_is_no_worker_and_owns_everything():
    assert workers.worker_of(None) is None
    assert workers.cpu_cores(None, [3, 1, 0, 2]) == [0, 1, 2, 3]


@pytest.mark.parametrize(("cores", "n"), [(2, 2), (8, 4), (7, 3), (64, 8)])
def test_cpu_cores_are_disjoint_and_cover_the_machine(cores, n):
    sets = [workers.cpu_cores(w, range(cores)) for w in team(n)]
    flat = [c for s in sets for c in s]
    assert sorted(flat) == list(range(cores)) and len(flat) == len(set(flat))
    assert max(map(len, sets)) - min(map(len, sets)) <= 1


def test_more_workers_than_cores_is_a_one_line_error():
    with pytest.raises(ConfigError, match="-n 4: only 2 CPU cores"):
        workers.cpu_cores(team(4)[3], [0, 1])


def test_cuda_devices_per_worker_and_topology():
    assert [workers.cuda_devices(w, 1, list("0123")) for w in team(4)] == [["0"], ["1"], ["2"], ["3"]]
    assert [workers.cuda_devices(w, 2, list("0123")) for w in team(2)] == [["0", "1"], ["2", "3"]]
    with pytest.raises(ConfigError, match="needs 8 GPUs; 4 visible"):
        workers.cuda_devices(team(4)[0], 2, list("0123"))


@pytest.mark.parametrize(("cores", "spec"), [([0], "0"), ([0, 1], "0"), ([4, 5, 6, 7], "4-6"),
                                             ([0, 2, 4], "0,2")])
def test_bind_spec_leaves_a_core_to_the_api_server_where_it_can(cores, spec):
    assert workers.bind_spec(cores) == spec


def test_groups_follow_the_launch_config():
    assert workers.group_of("MRV1-eager", None, None) == "MRV1-eager/http"
    assert workers.group_of("MRV1-eager", "LLM-MP0", None) == "MRV1-eager/LLM-MP0"
    assert workers.group_of("MRV1-eager", None, "security/test_api_key.py") != "MRV1-eager/http"
    node = "conformance/a.py::t[MRV1-eager]"
    assert workers.strip_group(f"{node}@MRV1-eager/http") == node


def _rec(nodeid, outcome, behaviour="x/a"):
    return {"nodeid": nodeid, "behaviour": behaviour, "variant": None, "transport": "http",
            "outcome": outcome, "round": 1, "message": ""}


def _run(worker, records, starts, **over):
    doc = {"catalog_sha256": "c", "profile": "0.32", "target": {"vllm_version": "0.32.0"},
           "model": "m", "fault": None, "target_url": None, "certified": None,
           "worker": {"id": worker, "devices": {"cpu_cores": [int(worker[2:])]}},
           "servers": {"starts": starts, "failed_starts": 0, "start_seconds": 30.0 * starts,
                       "instances_served": len(records), "test_seconds": 10.0, "wall_seconds": 50.0,
                       "per_config": {"MRV1-eager": len(records)}},
           "results": records}
    return doc | over


def test_merge_takes_each_instance_from_the_worker_that_ran_it():
    # Every worker registers every instance; it runs only its share.
    a = _run("gw0", [_rec("t1", "pass"), _rec("t2", "notrun"), _rec("t3", "notrun")], 1)
    b = _run("gw1", [_rec("t1", "notrun"), _rec("t2", "fail"), _rec("t3", "finding")], 2)
    merged = results.merge_runs({"gw1": b, "gw0": a}, {})
    outcomes = {r["nodeid"]: r["outcome"] for r in merged["results"]}
    assert outcomes == {"t1": "pass", "t2": "fail", "t3": "finding"}
    assert merged["counts"]["pass"] == 1 and merged["counts"]["fail"] == 1 and merged["counts"]["notrun"] == 0
    assert merged["verdict"].startswith("CONFORMANCE FAIL -- 1 passed | 1 failed")
    assert merged["servers"]["starts"] == 3 and merged["servers"]["per_worker"]["gw1"]["starts"] == 2
    assert merged["servers"]["per_config"] == {"MRV1-eager": 6}
    assert list(merged["workers"]) == ["gw0", "gw1"] and not merged["merge_problems"]


def test_an_instance_no_worker_ran_stays_not_run():
    merged = results.merge_runs({"gw0": _run("gw0", [_rec("t1", "notrun")], 0),
                                 "gw1": _run("gw1", [_rec("t1", "notrun")], 0)}, {})
    assert merged["counts"]["notrun"] == 1 and "CONFORMANCE FAIL" in merged["verdict"]


def test_workers_that_disagree_on_the_target_never_make_a_pass():
    a = _run("gw0", [_rec("t1", "pass")], 1)
    b = _run("gw1", [_rec("t2", "pass")], 1, profile="0.33")
    merged = results.merge_runs({"gw0": a, "gw1": b}, {})
    assert merged["merge_problems"] == ["gw1 disagrees on profile: '0.33' vs '0.32'"]
    assert "CONFORMANCE FAIL" in merged["verdict"]


def test_a_worker_that_ran_nothing_has_nothing_to_disagree_about():
    # -k picked fewer configs than workers: gw1 never resolved the model (still 'embedded').
    a = _run("gw0", [_rec("t1", "pass")], 1, model="/models/tiny")
    b = _run("gw1", [_rec("t1", "notrun"), _rec("t2", "skip")], 0, model="embedded")
    b["servers"]["instances_served"] = 0
    merged = results.merge_runs({"gw0": a, "gw1": b}, {})
    assert not merged["merge_problems"] and merged["model"] == "/models/tiny"
    assert merged["verdict"].startswith("CONFORMANCE PASS")


def test_workers_sort_numerically():
    runs = {f"gw{i}": _run(f"gw{i}", [_rec(f"t{i}", "pass")], 1) for i in (10, 2, 1)}
    assert list(results.merge_runs(runs, {})["workers"]) == ["gw1", "gw2", "gw10"]


def test_four_workers_on_a_fake_gpu_target_make_one_run(tmp_path):
    """End to end through pytest-xdist on the fake target: every worker owns one device and
    its own servers, and the controller writes one results.json, JUnit and report."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from selftests.conftest import write_fake_python

    probe = {"distribution": "vllm", "vllm_version": "0.32.0", "torch_version": "2.13.0",
             "platform": "cuda", "has_triton": True, "cuda_available": True, "device_name": "fake",
             "sleep_mode_available": True}
    python = write_fake_python(tmp_path, probe)
    report = tmp_path / "report"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VLLM_LIFECYCLE", "FAKE_"))}
    env |= {"CUDA_VISIBLE_DEVICES": "0,1,2,3", "PYTHONDONTWRITEBYTECODE": "1"}
    root = Path(__file__).resolve().parent.parent
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider", "-n", "4",
         "-k", "awake_baseline or test_pause_resume", "--lifecycle-transports", "http",
         "--lifecycle-python", str(python), "--lifecycle-model", "fake", "--lifecycle-report-dir",
         str(report), "--lifecycle-start-timeout", "60", "--lifecycle-request-timeout", "20"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
    out = proc.stdout + proc.stderr
    results = json.loads((report / "results.json").read_text())
    records = results["results"]
    assert len(records) == 12 and not results["counts"]["notrun"], out  # 3 variants x 4 tests
    assert {r["nodeid"].count("@") for r in records} == {0}
    workers_seen = results["workers"]
    devices = [tuple(w["devices"]["cuda_visible_devices"]) for w in workers_seen.values()
               if w and w["devices"]]
    assert devices and len(devices) == len(set(devices)) and all(len(d) == 1 for d in devices), workers_seen
    per_worker = results["servers"]["per_worker"]
    assert results["servers"]["starts"] == sum(w["starts"] for w in per_worker.values())
    # Grouping holds: a config's tests all run on one worker, so each config starts once
    # (xdist's own "@group" node-ID suffix no longer takes under pytest 9).
    per_config = results["servers"]["starts_per_config"]
    assert per_config and all(count == 1 for count, _ in per_config.values()), out
    assert (report / "junit.xml").is_file() and (report / "report.html").is_file()
    logs = {p.parent.name for p in (report / "server-logs").rglob("*.log")}
    assert logs and logs <= set(workers_seen), logs  # each worker logs into its own folder
    assert results["verdict"] in out
