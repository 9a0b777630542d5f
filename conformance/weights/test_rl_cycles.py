"""The RL step as frameworks run it, with a real sync in the middle: each ends on checkpoint
B's golden output with both flags clear and the sleep-state gauge awake."""

import pytest

from fixtures.judging.assertions import reply_is, state_is
from fixtures.judging.assertions import serves as assert_serves
from fixtures.observing.engine import AWAKE_GAUGE, StateView

CYCLES = ["colocated-level2", "colocated-level1-prefix-reset", "async-keep-no-clear"]


@pytest.mark.behaviour("weights/rl-cycle")
@pytest.mark.parametrize("cycle", CYCLES)
def test_rl_cycle(goldens, checkpoints, engine, weights, cycle):
    c = engine.control
    if cycle == "colocated-level2":  # verl, SkyRL colocated
        reply_is(c.sleep(2), 200, {"status": "sleeping", "level": 2})
        reply_is(c.wake_up(["weights"]), 200, {"status": "sleeping"})
        weights.sync(checkpoints["B"], "rl-B")
        reply_is(c.wake_up(["kv_cache"]), 200, {"status": "awake"})
    elif cycle == "colocated-level1-prefix-reset":  # NeMo-RL, OpenRLHF
        reset = c.call("POST", "/reset_prefix_cache")
        assert reset.status == 200, f"/reset_prefix_cache failed: {reset.describe()}"
        reply_is(c.sleep(1), 200, {"status": "sleeping", "level": 1})
        reply_is(c.wake_up(["weights"]), 200, {"status": "sleeping"})
        weights.sync(checkpoints["B"], "rl-B")
        reply_is(c.wake_up(["kv_cache"]), 200, {"status": "awake"})
    else:  # asynchronous / disaggregated RL: the engine stays awake, its requests kept
        reply_is(c.pause(mode="keep", clear_cache=False), 200, {"status": "paused"})
        weights.sync(checkpoints["B"], "rl-B")
        reply_is(c.resume(), 200, {"status": "resumed"})
    state_is(engine, StateView(False, False, AWAKE_GAUGE), f"after the {cycle} cycle")
    assert_serves(engine, 1, "B", goldens, f"after the {cycle} cycle")
