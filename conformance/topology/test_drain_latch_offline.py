"""RFC #51476 §1 (the latch): with data-parallel engines paused, a request that arrives must not
leave them reported running, so AsyncLLM.wait_for_requests_to_drain() returns; after the resume
the held request and a fresh one finish. Three rounds in a row: a latch shows up in any."""

import time

import pytest

from fixtures.judging.topology_judges import DrainRound, drain_round_problems
from fixtures.observing.offline import Called, Delivery, OfflineClient
from fixtures.spec.profiles import PROFILES

ROUNDS = 3
TOKENS = 16
PROMPT = "A request that reaches the data-parallel engines while they are paused"


def _failure(called: Called) -> str | None:
    return None if called.raised is None else called.describe()


def _ending(seen: Delivery | None) -> tuple[str, int]:
    if seen is None or not seen.outputs:
        return (f"raised {seen.error}" if seen and seen.error else "no output"), 0
    last = seen.outputs[-1]
    if not last["finished"]:
        return f"unfinished after {len(last['token_ids'])} tokens", len(last["token_ids"])
    return str(last["finish_reason"]), len(last["token_ids"])


def _round(offline: OfflineClient, n: int, held: bool, drain_limit: float,
           finish_limit: float) -> DrainRound:
    paused = offline.call("pause_generation", mode="abort")
    late, fresh = f"late-{n}", f"fresh-{n}"
    offline.add(late, PROMPT, TOKENS, kind="final_only")
    # Twice the limit: a slow drain is measured, not cut short at the limit.
    drained = offline.call("wait_for_requests_to_drain", drain_timeout=2 * drain_limit)
    running = offline.op("engines_running")["running"]
    resumed = offline.call("resume_generation")
    offline.add(fresh, PROMPT, TOKENS, kind="final_only")
    watched = [late, fresh] if held else [fresh]
    offline.collect({rid: "finished" for rid in watched}, timeout=finish_limit)
    seen = offline.deliveries()
    endings = {rid: _ending(seen.get(rid)) for rid in watched}
    raised = drained.raised
    return DrainRound(
        round=n, paused=_failure(paused), drain_seconds=drained.seconds,
        drain_raised=f"{raised['type']}: {raised['message']}" if raised else None,
        running_after=bool(running), resumed=_failure(resumed),
        finished={rid: how for rid, (how, _) in endings.items()},
        expected_tokens=TOKENS, tokens={rid: count for rid, (_, count) in endings.items()})


@pytest.mark.behaviour("topology/drain-after-late-request")
@pytest.mark.topologies("dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1")  # data parallelism needs the engine processes
def test_drain_returns_after_late_request(topology_offline, run_state, limits, measure):
    held = PROFILES[run_state.profile].late_arrival["abort"] == "held"
    drain_limit = limits["topology/drain-after-late-request:drain_s"].limit
    finish_limit = limits["topology/drain-after-late-request:after_resume_s"].limit
    for n in range(1, ROUNDS + 1):
        began = time.monotonic()
        seen = _round(topology_offline, n, held, drain_limit, finish_limit)
        problems = drain_round_problems([seen], drain_limit, finish_limit)
        # A latched round leaves nothing new for the next ones to show: stop at the first.
        assert not problems, (f"profile {run_state.profile}, {time.monotonic() - began:.1f} s: "
                              + "; ".join(problems))
        # Recorded (and within the limit by now): the drain time is a figure worth a trend.
        measure([limits["topology/drain-after-late-request:drain_s"].judge(seen.drain_seconds)])
