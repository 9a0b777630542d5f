"""RFC #51476 §3 on data parallelism: a pause is complete only when the engines are quiet.

Every DP rank steps while any rank has a request (the idle ones run dummy forwards in the
wave), and a pause sets every rank stepping until they agree on it. Once /pause has answered,
no engine may still be stepping: the CPU time of each engine-core process over the window
right after the answer is held to its own idle reading (fixtures/observing/process_cpu.py says why the
workers are not read), with one request running when the pause arrives, and again for a pause
of an idle engine (whose latency is recorded too).
"""

import threading
import time

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import judges
from fixtures.judging import topology_judges as tj
from fixtures.judging.assertions import reply_is
from fixtures.observing import device
from fixtures.observing.process_cpu import busy_cores, engine_processes
from fixtures.second_chances import SecondChance
from thresholds import Measurement

# Long enough that a stepping engine cannot hide between two samples, short for the suite:
# CPU time is counted in 10-ms ticks, a tenth of the 0.1-core limit over 1 s; NVML reports
# utilization per sample period of up to 1 s, so a window that reads the device is 2 s.
WINDOW_S = 1.0
DEVICE_WINDOW_S = 2.0
RUNNING_WITHIN_S = 10.0
STARTED_S = 0.5  # from reaching the server to decoding: a prefill of a short prompt
CLIENT_SLACK_S = 3.0  # the client may send the pause this much later than it meant to
ABORT_LENGTHS = 4  # the abort trial's request, in in-flight sizes (SEEN_ON_SERVER_SECONDS each)
TRIALS = 2  # a trial whose request ended before the pause was sent is void
BEHAVIOUR = "topology/quiescent-after-pause"


def window_s(platform: str) -> float:
    return DEVICE_WINDOW_S if platform == "cuda" else WINDOW_S


def watch(e, procs, idle, limits, step: str) -> list[Measurement]:
    """The window after `step`: every engine core's CPU time against its idle reading, and on
    a GPU every rank's device utilization, read over the same window."""
    readings: dict[str, int] = {}
    window = window_s(e.platform)
    if e.platform == "cuda":
        devices = device.engine_devices(dict(e.server.config.env))
        thread = threading.Thread(target=lambda: readings.update(device.busy_percent(devices, window)))
        thread.start()
    after = busy_cores(procs, window)
    found = tj.quiescence(idle, after, limits[f"{BEHAVIOUR}:busy_cores_above_idle"], step)
    if e.platform == "cuda":
        thread.join()
        if not readings:
            raise HarnessError(f"no NVML utilization was read over the window after {step}")
        found += tj.device_quiescence(readings, limits[f"{BEHAVIOUR}:busy_device_percent"], step)
    return found


@pytest.mark.behaviour(BEHAVIOUR)
@pytest.mark.topologies("dp2")
@pytest.mark.parametrize("mode", ["abort", "wait", "keep"])
def test_quiescent_after_pause(topology_engine, limits, measure, note, mode):
    e = topology_engine
    if e.platform != "cuda":
        note(f"device utilization not read: platform {e.platform!r} has no device NVML reads; "
             f"judged on the engine cores' CPU time alone")
    procs = engine_processes(e.server)
    idle = busy_cores(procs, window_s(e.platform))
    measure(tj.at_rest(idle, limits[f"{BEHAVIOUR}:busy_cores_at_rest"]))

    for trial in range(1, TRIALS + 1):
        # Seen on the server (/load), not by its stream: with a rank stepping on each of two
        # cores the client can be starved of chunks (start_in_flight's confirmation) for
        # seconds, and the DP running gauge moves only with the engines' periodic stats. The
        # same starvation can hold the pause itself for seconds on its way in, so
        # the request an abort must cut is sized to outlast that; it costs nothing when cut.
        gen = e.start_seen_on_server(f"a request running when the pause arrives ({mode})",
                                     within=RUNNING_WITHIN_S, settle=STARTED_S,
                                     lengths=ABORT_LENGTHS if mode == "abort" else 1)
        sent = time.monotonic()
        paused = e.control.pause(mode=mode)
        pause_sent = time.monotonic() - paused.seconds
        reply_is(paused, 200, {"status": "paused"})
        measure(watch(e, procs, idle, limits, f"after /pause?mode={mode} with a request running"))
        reply_is(e.control.resume(), 200, {"status": "resumed"})
        assert gen.done.wait(e.request_timeout), (
            f"the request running at /pause?mode={mode} did not end within "
            f"{e.request_timeout:.0f} s of /resume: {gen.summary()}")
        ended = judges.paused_request_problems(gen, mode)  # the engine's behaviour: a failure
        # Void, the client's timing and not the engine's doing: the request had ended when the
        # pause was sent, or it failed while the client sent the pause late (a trial that
        # passes holds however late the pause came: the request was still there to be cut).
        void = judges.ended_before(gen, sent) or (
            judges.client_late(gen.confirmed_at, pause_sent, STARTED_S, CLIENT_SLACK_S)
            if ended else None)
        if void is None:
            break
        if trial == TRIALS:
            raise HarnessError(f"in {TRIALS} trials no request was running at the pause; the "
                               f"last: {void}")
        e.chances.append(SecondChance("voided", f"trial {trial}: {void}; tried again"))
    assert not ended, (f"the request running at /pause?mode={mode} (answered in "
                       f"{paused.seconds:.2f} s): " + "; ".join(ended))

    paused = e.control.pause(mode=mode)
    reply_is(paused, 200, {"status": "paused"})
    measure([limits[f"{BEHAVIOUR}:idle_pause_s"].judge(paused.seconds),
             *watch(e, procs, idle, limits, f"after /pause?mode={mode} on an idle engine")])
    reply_is(e.control.resume(), 200, {"status": "resumed"})
