"""RFC #51476 §2 (vLLM #51488): a pause applies to requests through every API server, and every
API server reports the engine's state (upstream test_pause_multi_frontend.py)."""

import threading
import time

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.topology_judges import frontend_problems, held_problems
from fixtures.observing import frontends
from fixtures.observing.client import Reply, wait_until
from fixtures.spec.profiles import PROFILES

MAX_TOKENS = 8
REQUESTS_PER_FRONTEND = 8


def agree(fronts: list[frontends.Frontend], step: str, sleeping: bool, paused: bool) -> None:
    problems = frontend_problems({f.pid: f.flag("/is_paused", "is_paused") for f in fronts},
                                 paused, "/is_paused", step)
    problems += frontend_problems({f.pid: f.flag("/is_sleeping", "is_sleeping") for f in fronts},
                                  sleeping, "/is_sleeping", step)
    assert not problems, "; ".join(problems)


def load(front: frontends.Frontend) -> int:
    reply = front.call("GET", "/load")
    return int(reply.body["server_load"]) if reply.status == 200 else -1


def send(front: frontends.Frontend, prompt: str, out: list[Reply | BaseException]) -> threading.Thread:
    body = {"model": front.server.config.served_model_name, "prompt": prompt,
            "max_tokens": MAX_TOKENS, "temperature": 0.0, "ignore_eos": True}

    def run() -> None:
        try:
            out.append(front.call("POST", "/v1/completions", body))
        except BaseException as exc:  # recorded; judged below
            out.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


@pytest.mark.behaviour("topology/admission-every-frontend")
@pytest.mark.topologies("api2")
@pytest.mark.parametrize("mode", ["abort", "wait"])
def test_admission_every_frontend(topology_engine, topology, mode):
    e = topology_engine
    fronts = frontends.frontends(e.server, e.request_timeout, e.control.shape)
    first, last = fronts[0], fronts[-1]
    agree(fronts, "the awake baseline", sleeping=False, paused=False)

    reply_is(first.call("POST", f"/pause?mode={mode}"), 200, {"status": "paused"})
    agree(fronts, f"/pause?mode={mode} via API server pid {first.pid}", sleeping=True, paused=True)

    results: dict[int, list[Reply | BaseException]] = {f.pid: [] for f in fronts}
    threads = [send(f, f"through {f.pid} #{i}", results[f.pid])
               for f in fronts for i in range(REQUESTS_PER_FRONTEND)]
    sent = len(threads)
    # Rejected (retryable 503) or held, as the profile says of a request arriving while paused.
    rejected = PROFILES[e.profile].late_arrival[mode] == "rejected"
    if rejected:
        for thread in threads:
            thread.join(e.request_timeout)
        answers = [r for rs in results.values() for r in rs]
        wrong = [r.describe() if isinstance(r, Reply) else repr(r) for r in answers
                 if not (isinstance(r, Reply) and r.status == 503)]
        assert len(answers) == sent and not wrong, (
            f"during /pause?mode={mode}: expected all {sent} requests through {len(fronts)} API "
            f"servers rejected with 503; observed {len(answers)} answers, not 503: {wrong}")
    else:
        window = e.hold_window(MAX_TOKENS)
        for front in fronts:  # /load counts the requests each API server holds
            wait_until(lambda f=front: load(f) >= REQUESTS_PER_FRONTEND, timeout=10.0)
        time.sleep(window)
        answered = sum(len(rs) for rs in results.values())
        outcomes = [(n, n < answered, 0) for n in range(sent)]
        problems = held_problems(outcomes, window, f"during /pause?mode={mode}")
        answered = [r.describe() if isinstance(r, Reply) else repr(r) for rs in results.values() for r in rs]
        assert not problems, "; ".join(problems) + f"; answers: {answered}"
    agree(fronts, "requests through every API server during the pause", sleeping=True, paused=True)

    reply_is(last.call("POST", "/resume"), 200, {"status": "resumed"})
    agree(fronts, f"/resume via API server pid {last.pid}", sleeping=False, paused=False)
    for thread in threads:
        thread.join(e.request_timeout)
    if not rejected:
        bad = {pid: [r.describe() if isinstance(r, Reply) else repr(r) for r in rs
                     if not (isinstance(r, Reply) and r.status == 200
                             and r.body["choices"][0]["finish_reason"] == "length")]
               for pid, rs in results.items()}
        counts = {pid: len(rs) for pid, rs in results.items()}
        assert all(c == REQUESTS_PER_FRONTEND for c in counts.values()) and not any(bad.values()), (
            f"after /resume: expected all {sent} held requests to finish 'length' on every API "
            f"server; answers per API server {counts}, wrong ones {bad}")
