"""The client's heartbeat (fixtures/reporting/heartbeat.py): its lateness bookkeeping on a fake
clock, where its worst lateness shows (results.json, the verdict, the report, the benchmark),
and, for real, a stall that holds the GIL recorded from outside by the watchdog child."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from fixtures.reporting import benchmark, report
from fixtures.reporting import results as results_mod
from fixtures.reporting.heartbeat import ROOT, Heartbeat, describe, merge, stalled_s
from fixtures.reporting.watchdog import silence
from fixtures.spec.record import Record


class FakeTime:
    """A clock that a sleep moves on by the period plus the next of `lateness`."""

    def __init__(self, lateness: list[float]) -> None:
        self.now = 100.0
        self.lateness = list(lateness)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds + self.lateness.pop(0)


def test_the_heartbeat_keeps_its_worst_lateness_with_when_and_in_which_test():
    fake = FakeTime([0.0, 0.05, 4.0, 0.2])
    stalls = []
    beat = Heartbeat(stall_s=3.0, clock=fake.clock, sleep=fake.sleep,
                     on_stall=lambda late, test: stalls.append((round(late, 3), test)))
    beat.test = "t::a"
    beat.beat()
    beat.beat()
    beat.test = "t::b"
    assert round(beat.beat(), 3) == 4.0
    beat.beat()
    figures = beat.as_dict()
    assert figures["beats"] == 4 and figures["late_beats"] == 1 and figures["worst_late_s"] == 4.0
    assert figures["worst_test"] == "t::b" and 4.3 <= figures["worst_at_s"] <= 4.4  # 4.35 s in
    assert stalls == [(4.0, "t::b")]  # the dump is triggered once, by the late beat alone


def test_a_heartbeat_on_time_triggers_no_dump():
    fake = FakeTime([0.0, 2.9])
    stalls = []
    beat = Heartbeat(stall_s=3.0, clock=fake.clock, sleep=fake.sleep,
                     on_stall=lambda late, test: stalls.append(late))
    beat.beat()
    beat.beat()
    assert stalls == [] and beat.late_beats == 0 and round(beat.worst_late_s, 3) == 2.9
    assert stalled_s(beat.as_dict()) is None


def _beats(worst: float, test: str, late: int = 0, dumps: tuple[str, ...] = ()) -> dict:
    return {"period_s": 0.1, "stall_s": 3.0, "beats": 100, "worst_late_s": worst, "worst_at_s": 12.0,
            "worst_test": test, "late_beats": late, "dumps": list(dumps)}


def test_the_workers_heartbeats_merge_to_the_worst_with_its_process():
    merged = merge({"gw0": _beats(0.4, "t::a"), "gw1": _beats(41.2, "t::b", 1, ("stalls/w.txt",)),
                    "gw2": None})
    assert merged is not None
    assert (merged["worst_late_s"], merged["worst_test"], merged["worst_process"]) == (41.2, "t::b", "gw1")
    assert merged["beats"] == 200 and merged["late_beats"] == 1 and merged["dumps"] == ["stalls/w.txt"]
    assert merge({"gw0": None}) is None


def _document(heartbeat: dict | None) -> dict:
    records = [Record.from_dict({"nodeid": "t::a", "behaviour": "flags/x", "variant": "V",
                                 "transport": "http", "outcome": "pass", "duration": 1.0, "server": "V"})]
    return results_mod.run_document({"variants": ["V"], "fault": None}, {}, {"heartbeat": heartbeat},
                                    records)


def test_a_stalled_client_is_named_in_the_verdict_the_report_and_the_benchmark():
    doc = _document(_beats(41.2, "t::b", 1, ("stalls/watchdog-1-1.txt",)))
    assert doc["verdict"].endswith(" | client stalled 41.2 s (heartbeat)")
    assert doc["verdict"].startswith("CONFORMANCE PASS")
    line = describe(doc["machine"]["heartbeat"])
    assert line is not None and "worst 41.2 s late at 12 s in t::b" in line
    assert line.endswith("; 1 of 100 beats over 3.0 s late; 1 stack dumps in stalls/")
    assert "Client heartbeat (sleeps 0.1 s" in report.render_markdown(doc)
    assert "<p>Client heartbeat (sleeps 0.1 s" in report.render_html(doc)
    bench = benchmark.summarize(doc)
    assert bench.as_dict()["heartbeat_worst_late_s"] == 41.2
    assert ("- client heartbeat (sleeps 0.1 s, notes how late it wakes): worst 41.2 s"
            in benchmark.markdown(bench))


def test_a_client_on_time_leaves_the_verdict_alone_but_its_lateness_is_reported():
    doc = _document(_beats(0.4, "t::a"))
    assert "stalled" not in doc["verdict"]
    assert "worst 0.4 s late" in report.render_markdown(doc)
    assert "heartbeat" not in _document(None)["verdict"]
    assert "Client heartbeat" not in report.render_markdown(_document(None))


def test_the_workers_stall_reaches_the_merged_verdict():
    runs = {"gw0": _document(_beats(0.3, "t::a")), "gw1": _document(_beats(9.0, "t::c", 1))}
    merged = results_mod.merge_runs(runs, {})
    assert merged["machine"]["heartbeat"]["worst_process"] == "gw1"
    assert merged["verdict"].endswith(" | client stalled 9.0 s (heartbeat)")


def test_the_watchdog_measures_a_stall_by_the_beats_stamps():
    assert silence([10.1, 10.2, 14.7, 14.8], before=10.0) == 4.5
    assert round(silence([5.0], before=1.0), 3) == 4.0 and silence([], before=None) == 0.0


# A process whose main thread holds the GIL for seconds (a long switch interval and a busy loop:
# a thread sleeping in C would not hold it): its own heartbeat cannot beat meanwhile, but the
# watchdog child sees the beats stop and has faulthandler write the stacks while it lasts.
STALLING = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from fixtures.reporting.heartbeat import Beating, Heartbeat, watchdog_command

    def hold_the_gil(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass

    beating = Beating(Path(sys.argv[1]), Heartbeat(stall_s=0.5), watchdog=watchdog_command())
    time.sleep(0.5)
    sys.setswitchinterval(30)
    hold_the_gil(2.5)
    sys.setswitchinterval(0.005)
    time.sleep(0.5)
    print(json.dumps(beating.stop()))
""")


def test_a_stall_that_holds_the_gil_is_dumped_from_outside(tmp_path: Path):
    run = subprocess.run([sys.executable, "-c", STALLING, str(tmp_path)], capture_output=True,
                         text=True, timeout=60, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    figures = json.loads(run.stdout)
    assert figures["worst_late_s"] > 1.5 and figures["late_beats"] >= 1
    dumps = figures["dumps"]
    faults = [d for d in dumps if d.startswith("stalls/faulthandler-")]
    watched = [d for d in dumps if d.startswith("stalls/watchdog-")]
    assert faults and watched and any(d.startswith("stalls/late-beat-") for d in dumps), dumps
    # Written while the GIL was held: the holder's stack, in the function that held it.
    assert "hold_the_gil" in (tmp_path / faults[0]).read_text()
    watchdog = (tmp_path / watched[0]).read_text()
    assert "sent no heartbeat for" in watchdog
    assert "seconds waiting in the run queue" in watchdog and "busiest processes over" in watchdog
    # The silence measured from the beats' own stamps: the GIL held 2.5 s, whatever the dumps took.
    came_back = (tmp_path / watched[0]).read_text().split("the longest silence between two beats was ")[1]
    assert 2.0 <= float(came_back.split(" s")[0]) <= 10.0
