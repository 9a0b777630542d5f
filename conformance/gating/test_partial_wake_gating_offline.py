"""A request submitted through the Python API while only one memory tag is awake is held."""

import pytest

from fixtures.judging import delivery
from fixtures.judging.offline_judges import return_problems

PROMPT = "A request that arrives while half of the engine memory is still asleep must wait."
TOKENS = 48


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_holds_requests_offline(offline, order):
    first, second = order
    expected = offline.reference(PROMPT, TOKENS)
    problems = return_problems(offline.call("sleep", level=1))
    problems += return_problems(offline.call("wake_up", tags=[first]), False)
    offline.phase("partial")
    offline.add("held", PROMPT, TOKENS, kind="delta")
    offline.collect({"held": "started"}, timeout=offline.hold_window(TOKENS))
    # Judged on the tokens the frontend processed, read before the wake is even sent: which
    # phase the first output is stamped with races the wake's own return.
    before_wake = offline.progress("held")
    delivered = len(offline.deliveries()["held"].outputs)
    if before_wake or delivered:
        problems.append(f"the request started while only {first} was awake "
                        f"({before_wake} tokens processed, {delivered} outputs delivered)")
    problems += return_problems(offline.call("wake_up", then="awake", tags=[second]), True)
    if not offline.collect({"held": "finished"}):
        problems.append(f"the request did not finish within {offline.timeout:.0f} s of the full wake")
    held = offline.deliveries()["held"]
    problems += delivery.exactly_once_problems("delta", held.outputs, expected)
    assert not problems, "; ".join(problems) + f"; observed {held.summary()}"
