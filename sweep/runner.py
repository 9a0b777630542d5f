"""The suite against one release: a child pytest in its own process group, so a timeout or Ctrl-C
stops it (and the vLLM servers it started) without stopping the sweep's own process."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixtures.launching.server import KILL, stop_process_group

# After SIGINT pytest tears its fixtures down (servers stopped, results written): give it that long.
GRACE_SECONDS = 60.0


@dataclass
class RunOutcome:
    results: dict[str, Any] | None
    reason: str | None
    seconds: float  # the run itself, from the moment the lock (if any) was held
    returncode: int | None
    waited: float = 0.0  # seconds spent waiting for the lock


def command(python: Path, report_dir: Path, extra: Sequence[str]) -> list[str]:
    """The child's command line: the suite from this interpreter, the target from the release's."""
    return [sys.executable, "-m", "pytest", "conformance", "--lifecycle-python", str(python),
            "--lifecycle-report-dir", str(report_dir), "-p", "no:cacheprovider", *extra]


@contextlib.contextmanager
def held(lock: Path | None) -> Iterator[None]:
    """Hold an exclusive flock on `lock` (where only one live vLLM may run machine-wide)."""
    if lock is None:
        yield
        return
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT first, so pytest finalises (it may wait alone on its servers: each step's whole grace)."""
    steps = ((signal.SIGINT, GRACE_SECONDS), (signal.SIGTERM, 15.0), KILL)
    stop_process_group(proc, steps=steps, leader_alone=False)


def _results(report_dir: Path) -> tuple[dict[str, Any] | None, str | None]:
    path = report_dir / "results.json"
    if not path.is_file():
        return None, None
    try:
        return json.loads(path.read_text()), None
    except (OSError, ValueError) as exc:
        return None, f"results.json unreadable: {exc}"


def _last_line(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def run_suite(python: Path, report_dir: Path, extra: Sequence[str], repo: Path, timeout: float,
              lock: Path | None = None, env: Mapping[str, str] | None = None) -> RunOutcome:
    """Run the suite against `python`'s vLLM; never raises for the child's failure (the outcome says
    why), re-raises KeyboardInterrupt after stopping the child."""
    report_dir.mkdir(parents=True, exist_ok=True)
    stale = report_dir / "results.json"
    stale.unlink(missing_ok=True)  # a results document must be this run's
    log = report_dir / "sweep-pytest.log"
    cmd = command(python, report_dir, extra)
    asked = time.monotonic()
    with held(lock), open(log, "wb") as out:
        start = time.monotonic()
        out.write(("$ " + " ".join(cmd) + "\n").encode())
        out.flush()
        proc = subprocess.Popen(cmd, cwd=repo, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
        try:
            rc: int | None = proc.wait(timeout=timeout)
            reason = None
        except subprocess.TimeoutExpired:
            _stop(proc)
            rc, reason = proc.returncode, f"the suite took longer than {timeout:g} s and was stopped"
        except KeyboardInterrupt:
            _stop(proc)
            raise
    seconds = time.monotonic() - start
    results, problem = _results(report_dir)
    if results is None:
        reason = reason or problem or (
            f"the suite wrote no results (exit {rc}): {_last_line(log) or 'no output'}")
    return RunOutcome(results, reason, seconds, rc, waited=start - asked)


def verify_reproducers(python: Path, report_dir: Path, repo: Path, timeout: float,
                       env: Mapping[str, str] | None = None) -> str:
    """Every finding's standalone reproducer against this release (fixtures/reproducing/verify.py),
    written beside its suite run (reproducers.json, read into the matrix); one line for the facts."""
    cmd = [sys.executable, "-m", "fixtures.reproducing.verify", "--python", str(python),
           "--out", str(report_dir)]
    with open(report_dir / "sweep-reproducers.log", "wb") as out:
        proc = subprocess.Popen(cmd, cwd=repo, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **(env or {})})
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            return f"stopped after {timeout:g} s"
        except KeyboardInterrupt:
            _stop(proc)
            raise
    return _last_line(report_dir / "sweep-reproducers.log") or f"exit {rc}"

