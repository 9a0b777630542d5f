"""CPU seconds by role: the roles, the process tree and the accounting on hand-made readings,
and the sampler on a real child process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fixtures.reporting.cpu_roles import CpuSampler, account, descendants, role_of


@pytest.mark.parametrize(("argv", "role"), [
    (["VLLM::Worker_DP0"], "vLLM worker"),
    (["VLLM::EngineCore_DP1"], "vLLM engine core"),
    (["VLLM::EngineCore"], "vLLM engine core"),
    (["VLLM::APIServer_1"], "vLLM API server"),
    (["VLLM::DPCoordinator"], "vLLM DP coordinator"),
    (["VLLM::Something"], "other"),
    (["python", "-B", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(...)"],
     "process start (spawned, importing)"),
    (["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"], "vLLM API server"),
    (["python", "-m", "fixtures.in_target.offline_host", "--model", "m"], "offline host"),
    (["[pytest-xdist running] conformance/x.py::test"], "pytest"),
    (["python", "-u", "-c", "import sys;exec(eval(sys.stdin.readline()))"], "pytest"),
    (["python", "-m", "pytest", "conformance"], "pytest"),
    (["python", "-c", "import vllm.entrypoints.cli.main"], "other"),  # a probe, not a server
    (["bash"], "other"),
    ([], "other"),
])
def test_a_process_gets_its_role_from_its_command_line(argv, role):
    assert role_of(argv) == role


def test_the_tree_is_the_root_and_every_process_that_descends_from_it():
    parents = {10: 1, 11: 10, 12: 11, 13: 12, 20: 1, 21: 20}  # a server's grandchildren count
    assert descendants(parents, 10) == {10, 11, 12, 13}
    assert descendants(parents, 99) == {99}


def test_accounting_counts_a_known_process_since_it_was_last_seen_and_a_new_one_since_birth():
    seen = {(10, 5): 100}  # alive at the run's start: its 100 ticks before are not the run's
    totals: dict[str, float] = {}
    account(seen, {(10, 5): ("pytest", 150), (11, 90): ("process start", 40)}, totals, hz=100)
    assert totals == {"pytest": 0.5, "process start": 0.4}
    # The spawned child retitled itself: what it spends from now on is the new role's.
    account(seen, {(10, 5): ("pytest", 150), (11, 90): ("vLLM worker", 240)}, totals, hz=100)
    assert totals == {"pytest": 0.5, "process start": 0.4, "vLLM worker": 2.0}
    # A reused pid is another process (another start time): counted from its birth.
    account(seen, {(11, 700): ("offline host", 30)}, totals, hz=100)
    assert totals["offline host"] == 0.3


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_the_sampler_counts_a_busy_child_under_its_role():
    sampler = CpuSampler(every=0.2).start()
    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nwhile time.process_time() < 1.0: pass\n"
                              "time.sleep(0.6)"])
    try:
        child.wait(timeout=30)
        time.sleep(0.1)
    finally:
        child.kill()
    totals = sampler.stop()
    # The child is "other" (a plain python): 1 s of its own CPU, seen in samples before it ended.
    assert totals.get("other", 0.0) >= 0.8, totals
    assert sampler.stop() == totals  # idempotent
