"""Runs the detection cases in the background: the cases needing a DP server (a core per rank)
first, one at a time, on every core; the rest in one lane per core, each lane taking the next
case as it frees (detection/cases.py:schedule). Each test waits for its own case. Every child is
started and stopped here: at the end of the session, on a failure or on Ctrl-C, `stop` ends
the ones still running, by process group.
"""

from __future__ import annotations

import functools
import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from detection.cases import Case, Schedule
from fixtures.launching.server import stop_process_group
from fixtures.launching.target import PROBED_ENV, handed_probe, probe_output
from fixtures.spec.record import Record, records_of

ROOT = Path(__file__).resolve().parent.parent
CASE_TIMEOUT_S = 1200

# What one case run gives back: its results records and the child's log.
Outcome = tuple[list[Record], Path]
# (case, the cores its child may use (None: every core), where to keep the live child) -> outcome
RunCase = Callable[[Case, "tuple[int, ...] | None", Callable[[subprocess.Popen[bytes]], None]], Outcome]



@functools.cache
def _probed() -> str:
    """The target every case runs against (the children's --lifecycle-python), probed once."""
    python = os.environ.get("VLLM_LIFECYCLE_PYTHON") or sys.executable
    return handed_probe(python, probe_output(python))


def run_case(case: Case, report_dir: Path, cores: tuple[int, ...] | None = None,
             keep: Callable[[subprocess.Popen[bytes]], None] = lambda proc: None,
             ) -> Outcome:
    """One child run of the case's slice; `cores` confines its engines (None: every core),
    `keep` is handed the live child so the session can stop it."""
    out = report_dir / case.name
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "conformance", "-q", "-p", "no:cacheprovider",
               "--lifecycle-report-dir", str(out), *case.pytest_args()]
    if cores is not None:
        command += ["--lifecycle-cpu-cores", ",".join(map(str, cores))]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_LIFECYCLE_FAULT"}
    env[PROBED_ENV] = _probed()  # one probe of the target for every case, not one per case
    log = out / "pytest.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                start_new_session=True)
        keep(proc)
        try:
            proc.wait(timeout=CASE_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                stop_process_group(proc, grace=90)
    results = out / "results.json"
    if not results.is_file():
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(
            f"case {case.name}: the child run wrote no results (exit {proc.returncode}):\n{tail}")
    return records_of(json.loads(results.read_text())), log


class Lanes:
    def __init__(self, plan: Schedule, cores: list[int], run_case: RunCase) -> None:
        if plan.lanes > 1 and len(cores) < plan.lanes:
            raise ValueError(f"{plan.lanes} lanes need as many cores; {len(cores)} available")
        self.plan, self.cores, self.run_case = plan, cores, run_case
        self.futures: dict[str, Future[Outcome]] = {
            c.name: Future() for c in (*plan.alone, *plan.side_by_side)}
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._dispatcher = threading.Thread(target=self._dispatch, name="detection-lanes", daemon=True)

    def start(self) -> None:
        self._dispatcher.start()

    def result(self, name: str) -> Outcome:
        return self.futures[name].result()

    def stop(self) -> None:
        """No new case starts; every child still running is stopped (terminate, wait, kill)."""
        self._stopping.set()
        with self._lock:
            live = list(self._live)
        for proc in live:
            if proc.poll() is None:
                stop_process_group(proc, grace=90)
        self._dispatcher.join(timeout=120)

    # -- in the background ---------------------------------------------------------------
    def _keep(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._live.add(proc)
        if self._stopping.is_set():  # stop() may have read the set before this child was in it
            stop_process_group(proc, grace=90)

    def _run(self, case: Case, cores: tuple[int, ...] | None) -> None:
        future = self.futures[case.name]
        if self._stopping.is_set():
            future.set_exception(RuntimeError(f"case {case.name}: not run, the session was stopped"))
            return
        try:
            future.set_result(self.run_case(case, cores, self._keep))
        except BaseException as exc:  # the test waiting on it raises it: an error, not a pass
            future.set_exception(exc)

    def _dispatch(self) -> None:
        for case in self.plan.alone:
            self._run(case, None)
        pending: queue.SimpleQueue[Case] = queue.SimpleQueue()
        for case in self.plan.side_by_side:
            pending.put(case)

        def lane(core: int) -> None:
            while True:
                try:
                    case = pending.get_nowait()
                except queue.Empty:
                    return
                self._run(case, (core,))

        threads = [threading.Thread(target=lane, args=(core,), name=f"detection-lane-{core}",
                                    daemon=True) for core in self.cores[:self.plan.lanes]]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
