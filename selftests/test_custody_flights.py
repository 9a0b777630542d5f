"""The custody judges over one request per data-parallel engine: one call, each request judged
alone by the single engine's rules, each problem naming its engine (fixtures/judging/custody.py)."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import custody, judges
from fixtures.observing.client import Generation, Reply
from fixtures.observing.flights import Flight
from fixtures.protocol.generation import Outcome

REFERENCE = list(range(100, 116))


def ended(reason: str, ids: list[int], stream: bool = True) -> Generation:
    gen = Generation(stream=stream, max_tokens=16, finish_reasons={0: reason}, token_ids=ids,
                     completion_tokens=len(ids))
    gen.chunks = [(0.01, "x")] * len(ids)
    gen.ended = time.monotonic() + 60  # after any call the test sends
    gen.done.set()
    return gen


def engine() -> SimpleNamespace:
    return SimpleNamespace(request_timeout=1.0)


def paused() -> Reply:
    return Reply("POST", "/pause?mode=abort", 200, {"status": "paused"}, 0.01)


def test_an_abort_judges_each_engine_and_names_the_one_whose_ids_changed():
    flights = [Flight(ended("abort", REFERENCE[:5]), 16, REFERENCE, 0),
               Flight(ended("abort", [*REFERENCE[:3], 7]), 16, REFERENCE, 1)]
    problems = custody.abort_fates_problems(engine(), flights, paused, {"status": "paused"})  # type: ignore[arg-type]
    assert problems == ["engine 1: token ids differ from the uninterrupted run from position 3 "
                        "(4 ids delivered, 16 in the run)"]
    # One engine: the same judges, no engine named.
    alone = [Flight(ended("length", REFERENCE), 16, REFERENCE)]
    found = custody.abort_fates_problems(engine(), alone, paused, {"status": "paused"})  # type: ignore[arg-type]
    assert found[0] == "finish reasons ['length'], expected all 'abort'"
    assert found[1] == "16 tokens: the request ran to its end, not cut by abort"


def test_a_wait_judges_every_engine_by_its_own_reference():
    other = [9, *REFERENCE[1:]]
    flights = [Flight(ended("length", REFERENCE), 16, REFERENCE, 0),
               Flight(ended("length", REFERENCE), 16, other, 1)]
    problems = custody.wait_fates_problems(engine(), flights, paused, {"status": "paused"})  # type: ignore[arg-type]
    assert problems[0] == ("engine 1: token ids differ from the uninterrupted run from position 0 "
                           "(16 vs 16 ids)")
    assert len(problems) == 2 and problems[1].startswith("engine 1: observed ")


def test_a_keep_names_the_engine_that_cut_its_request(monkeypatch):
    monkeypatch.setattr(custody.time, "sleep", lambda s: None)
    cut = ended("abort", REFERENCE[:4])
    frozen = Generation(stream=True, max_tokens=16)
    frozen.chunks = [(0.01, "x")] * 4

    def resume() -> Reply:
        frozen.finish_reasons, frozen.token_ids, frozen.completion_tokens = {0: "length"}, REFERENCE, 16
        frozen.ended = time.monotonic() + 60
        frozen.done.set()
        return Reply("POST", "/resume", 200, {"status": "resumed"}, 0.01)

    flights = [Flight(frozen, 16, REFERENCE, 0), Flight(cut, 16, REFERENCE, 1)]
    problems = custody.keep_fates_problems(engine(), flights, paused, {"status": "paused"}, resume)  # type: ignore[arg-type]
    assert problems[:2] == ["engine 1: finish reasons ['abort'], expected all 'length'",
                            "engine 1: 4 completion tokens, expected 16"]
    assert not any(p.startswith("engine 0") for p in problems)


def test_a_request_over_before_the_call_makes_the_trial_an_error():
    over = ended("length", REFERENCE)
    over.ended = time.monotonic() - 5
    flights = [Flight(ended("abort", REFERENCE[:3]), 16, REFERENCE, 0),
               Flight(over, 16, REFERENCE, 1)]
    with pytest.raises(HarnessError, match=r"ended 5.* before the call was sent"):
        custody.abort_fates_problems(engine(), flights, paused, {"status": "paused"})  # type: ignore[arg-type]


def test_a_prefix_is_judged_on_what_was_delivered():
    assert judges.prefix_problems(ended("abort", REFERENCE[:7]), REFERENCE) == []
    assert judges.prefix_problems(ended("abort", []), REFERENCE) == []
    assert judges.prefix_problems(ended("abort", [*REFERENCE, 1]), REFERENCE) == [
        "token ids differ from the uninterrupted run from position 16 (17 ids delivered, 16 in the run)"]


def test_a_wait_pause_drains_every_request_before_any_resume():
    def seen(ended: bool, tokens: int) -> Outcome:
        return Outcome(ended, list(range(tokens)), tokens, "length" if ended else None, None, int(ended), "s")

    assert custody.drained_problems({None: seen(True, 16)}, 16) == []
    late = custody.drained_problems({0: seen(True, 16), 1: seen(False, 5)}, 16)
    assert late == [f"engine 1: request still running {custody.DRAIN_SETTLE_S:.0f} s after the call "
                    "answered (5/16 tokens received): the call did not wait for it"]
