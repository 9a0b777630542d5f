"""The offline delivery judges, on hand-made output histories."""

from __future__ import annotations

import pytest

from fixtures.judging import delivery

REF = [5, 6, 7, 8]


def out(ids, finished=False, reason=None, phase="awake"):
    return {"token_ids": list(ids), "finished": finished, "finish_reason": reason, "phase": phase}


GOOD = {
    "cumulative": [out([5]), out([5, 6]), out([5, 6, 7, 8], True, "length")],
    "delta": [out([5]), out([6, 7]), out([8], True, "length")],
    "final_only": [out(REF, True, "length")],
}


@pytest.mark.parametrize("kind", sorted(GOOD))
def test_a_clean_delivery_passes(kind):
    assert delivery.exactly_once_problems(kind, GOOD[kind], REF) == []


@pytest.mark.parametrize(("kind", "outputs", "needle"), [
    ("delta", [out([5, 6]), out([6, 7]), out([8], True, "length")], "(1 tokens repeated in delivery)"),
    ("delta", [out([5]), out([8], True, "length")], "(2 tokens lost in delivery)"),
    ("delta", [out([5, 6]), out([7, 8], True, "length"), out([], True, "length")],
     "2 outputs are marked finished"),
    ("cumulative", [out([5]), out([5]), out(REF, True, "length")], "delivered twice"),
    ("cumulative", [out([5, 6]), out([5]), out(REF, True, "length")], "does not extend"),
    ("cumulative", [out(REF, True, "length"), out(REF)], "more were delivered after it"),
    ("final_only", [out([5, 6]), out(REF, True, "length")], "expected exactly one"),
    ("final_only", [out(REF, True, "abort")], "finish reason 'abort'"),
    ("final_only", [out([5, 6, 7, 9], True, "length")], "first difference at position 3"),
    ("final_only", [], "nothing was delivered"),
])
def test_each_broken_delivery_is_named(kind, outputs, needle):
    problems = delivery.exactly_once_problems(kind, outputs, REF)
    assert any(needle in p for p in problems), problems


def test_unknown_kind_is_a_harness_mistake():
    with pytest.raises(ValueError, match="unknown output kind"):
        delivery.exactly_once_problems("sometimes", GOOD["delta"], REF)


PHASES = ("awake", "draining", "asleep", "woken")


def test_finished_before_needs_the_end_in_time():
    assert delivery.late_finish_problems([out(REF, True, "length", "asleep")], "woken", PHASES) == []
    late = delivery.late_finish_problems([out([5], phase="asleep"), out(REF, True, "length", "woken")],
                                         "woken", PHASES)
    assert late == ["finished only in phase 'woken', not before 'woken'"]
    assert delivery.late_finish_problems([out([5])], "woken", PHASES) == ["never finished"]


def test_first_difference_counts_a_short_run() -> None:
    assert delivery.first_difference([1, 2], [1, 2, 3]) == 2
    assert delivery.first_difference([1, 2], [1, 2]) is None
