"""Clients keep generating while another caller cycles the lifecycle: nothing hangs or breaks."""

import threading
import time

import pytest

from fixtures import judges
from fixtures.client import Generation
from fixtures.expect import serving
from fixtures.profiles import PROFILES

CLIENTS = 3
CYCLES = 3
TOKENS = 64
MAX_REQUESTS_PER_CLIENT = 40  # bounds the run whatever the engine does


def step_calls(engine):
    """One cycle of the RL step: pause, sleep, staged wake, resume."""
    return [
        ("pause keep", lambda: engine.control.pause("keep"), {"status": "paused"}),
        ("sleep 1", lambda: engine.control.sleep(1), {"status": "sleeping"}),
        ("wake weights", lambda: engine.control.wake_up(["weights"]), {"status": "sleeping"}),
        ("wake kv_cache", lambda: engine.control.wake_up(["kv_cache"]), {"status": "awake"}),
        ("resume", lambda: engine.control.resume(), {"status": "resumed"}),
    ]


@pytest.mark.behaviour("liveness/concurrent-cycles")
def test_concurrent_cycles(engine):
    stop = threading.Event()
    records: list[Generation] = []
    lock = threading.Lock()

    def client(index: int) -> None:
        for n in range(MAX_REQUESTS_PER_CLIENT):
            if stop.is_set():
                return
            gen = engine.gen.complete(f"client {index} request {n}", TOKENS, stream=index % 2 == 0)
            with lock:
                records.append(gen)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for thread in threads:
        thread.start()
    health: list[int] = []
    try:
        for _ in range(CYCLES):
            for name, call, expected in step_calls(engine):
                reply = call()
                assert reply.status == 200 and all(reply.body.get(k) == v for k, v in expected.items()), (
                    f"{name}: expected 200 {expected}; observed {reply.describe()}"
                )
                health.append(engine.control.health())
                time.sleep(0.2)  # let requests arrive between calls
    finally:
        stop.set()
        for thread in threads:
            thread.join(engine.request_timeout)
    stuck = [t.name for t in threads if t.is_alive()]
    assert not stuck, f"client threads still waiting after {engine.request_timeout:.0f} s: {stuck}"

    allowed_503 = any(f == "rejected" for f in PROFILES[engine.profile].late_arrival.values())
    problems = []
    for gen in records:
        if gen.error is not None:
            rejected = not judges.rejected_while_paused(gen)
            if not (allowed_503 and rejected):
                problems.append(f"request failed: {gen.error!r}")
        elif gen.finish_reason is None and not gen.completion_tokens:
            continue  # ended while still queued, cut by the sleep's abort: custody/abort-before-first-token
        elif gen.finish_reason not in ("length", "abort"):
            problems.append(f"request ended with {gen.finish_reason!r}: {gen.summary()}")
    if any(code != 200 for code in health):
        problems.append(f"/health answered {sorted(set(health))} during the cycles")
    assert records, "no request completed while the lifecycle cycled"
    assert not problems, f"{len(problems)} of {len(records)} requests: " + "; ".join(problems[:5])
    serving(engine, "after the cycles")
