"""Custody of requests confirmed in flight across a pause and a resume, per mode, over HTTP
(/pause, /resume) and through AsyncLLM (pause_generation, resume_generation): on one engine,
and on every data-parallel engine at once (one request pinned to each, each judged alone)."""

import time

import pytest

from fixtures.judging import custody, judges
from fixtures.judging.protocol_judges import answer_problems
from fixtures.observing.engine import FREEZE_WINDOW_S, SETTLE_S
from fixtures.protocol.capabilities import PAUSE
from fixtures.protocol.drain import DRAIN_SETTLE_S
from fixtures.protocol.generation import where
from fixtures.spec.profiles import MODES


@pytest.mark.behaviour("custody/pause-in-flight")
@pytest.mark.topologies("single", "dp2")
@pytest.mark.offline_engines("AsyncLLM-MP1", "AsyncLLM-MP0")  # LLM has no pause in 0.32/0.33
# The Python API adds prompts and collects their outputs as they stream, and its keep pause
# clears the cache as HTTP's keep-recompute does (clear_cache's default).
@pytest.mark.transport_params("offline", mode=("abort", "wait", "keep-recompute"), stream=True,
                              api="completions")
# Beyond one engine: one instance per mode (a several-engine server takes the whole machine),
# through AsyncLLM with its engine processes (data parallelism needs them); HTTP's keep there
# is the exact one (clear_cache=false).
@pytest.mark.topology_params(offline_engine=("http", "AsyncLLM-MP1"), stream=True, api="completions")
@pytest.mark.topology_params("http", mode=tuple(MODES))
@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "nonstream"])
@pytest.mark.parametrize("mode", [*MODES, "keep-recompute"])
def test_pause_in_flight(lifecycle, topology, mode, stream, api):
    """keep holds the KV (clear_cache=false): the output must equal the uninterrupted run.
    keep-recompute uses the pause's default clear_cache=true: the request is preempted and
    recomputed, so it must finish in full, but its ids may take another numeric path. An
    aborted request's ids must be the start of its uninterrupted run."""
    lifecycle.require(PAUSE)
    control, generate = lifecycle.control, lifecycle.generate
    pause = mode.removesuffix("-recompute")
    size, references = generate.start_in_flight(topology.ranks, stream, api, exact=mode != "keep-recompute")
    generate.mark("pausing")
    problems = answer_problems(control.pause(pause, clear_cache=False if mode == "keep" else None))
    generate.mark("paused")
    if pause == "keep":
        generate.settle(SETTLE_S)
        settled = generate.progress()
        time.sleep(FREEZE_WINDOW_S)
        problems += [where(rank) + p for rank, later in generate.progress().items()
                     for p in judges.freeze_problems(settled[rank], later, size)]
    elif pause == "wait":  # drained: ended by the time the pause answered, with no resume
        problems += custody.drained_problems(generate.await_end(DRAIN_SETTLE_S), size)
    if pause != "abort":  # an aborted request ends with no resume
        problems += answer_problems(control.resume())
        generate.mark("resumed")
    timeout = generate.timeout
    ended = generate.await_end(timeout)
    after = "abort" if pause == "abort" else "resume"
    for rank, seen in ended.items():
        fate = (custody.pause_fate_problems(pause, seen, size, references.get(rank)) if seen.ended
                else [f"request did not end within {timeout:.0f} s of the {after}"])
        problems += [where(rank) + p for p in fate]
    problems = custody.pause_standing(problems, ended, size, generate.misplaced())
    assert not problems, f"/pause?mode={pause}: " + "; ".join(problems)
