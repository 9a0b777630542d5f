"""An RL run syncs hundreds of times: a session that leaves a thread, a file or memory behind,
or that slows the next one, fails the run after N steps while a handful of syncs pass. N comes
from the thresholds file (a soak raises it); the curve of each reading goes in the report."""

import time

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.launching.external import needs_own_process
from fixtures.observing.device import tree_usage
from thresholds import judges

SERIES = ("rss_bytes", "threads", "open_fds")


@pytest.mark.behaviour("weights/many-syncs-stable")
def test_many_syncs_stable(goldens, checkpoints, engine, weights, limits, measure, record_property):
    needs_own_process(engine.server)
    syncs = int(limits["weights/many-syncs-stable:syncs"].limit)
    readings: list[judges.SyncReading] = []
    label = "A"
    for n in range(1, syncs + 1):
        label = "B" if n % 2 else "A"  # each sync pushes the checkpoint the engine is not on
        began = time.monotonic()
        reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
        weights.sync(checkpoints[label], f"soak-{n}-{label}")
        reply_is(engine.control.resume(), 200, {"status": "resumed"})
        readings.append(judges.SyncReading(*tree_usage(engine.server.proc.pid),
                                           seconds=time.monotonic() - began))
    for name in SERIES:
        record_property(f"{name}_per_sync", [getattr(r, name) for r in readings])
    record_property("sync_seconds_per_sync", [round(r.seconds, 3) for r in readings])
    assert_serves(engine, 1, label, goldens, f"after {syncs} syncs, the last of {label}")
    measure(judges.many_syncs_stable(readings, limits))
