"""A request submitted through the Python API while only one memory tag is awake is held."""

import pytest

from fixtures import delivery
from fixtures.engine import HOLD_WINDOW_S
from fixtures.offline import reference, returned

PROMPT = "A request that arrives while half of the engine memory is still asleep must wait."
TOKENS = 48
PHASES = ("partial", "awake")


@pytest.mark.behaviour("gating/partial-wake-holds-requests")
@pytest.mark.parametrize("order", [("weights", "kv_cache"), ("kv_cache", "weights")],
                         ids=lambda o: f"{o[0]}-first")
def test_partial_wake_holds_requests_offline(offline, order):
    first, second = order
    expected = reference(offline, PROMPT, TOKENS)
    problems = returned(offline.call("sleep", level=1))
    problems += returned(offline.call("wake_up", tags=[first]), False)
    offline.phase("partial")
    offline.add("held", PROMPT, TOKENS, kind="delta")
    if offline.collect({"held": "started"}, timeout=HOLD_WINDOW_S):
        problems.append(f"the request started while only {first} was awake "
                        f"({offline.progress('held')} tokens processed)")
    problems += returned(offline.call("wake_up", then="awake", tags=[second]), True)
    if not offline.collect({"held": "finished"}):
        problems.append(f"the request did not finish within {offline.timeout:.0f} s of the full wake")
    held = offline.deliveries()["held"]
    problems += delivery.silent_before(held.outputs, "awake", PHASES)
    problems += delivery.delivered_once("delta", held.outputs, expected)
    assert not problems, "; ".join(problems) + f"; observed {held.summary()}"
