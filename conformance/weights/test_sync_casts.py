"""A trainer ships weights in its own precision: checkpoint B stored in half precision (its
config unchanged) is synced into the engine, whose loader must cast each tensor as it does when
an engine starts on that file. (The checkpoints as built are float32; an engine that serves
another dtype, as vLLM's auto dtype does on CPU, casts on every sync of sync-lands too.)"""

import pytest

from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.weight_sync import outputs


@pytest.mark.behaviour("weights/sync-casts-on-load")
def test_sync_casts_on_load(goldens, cast_checkpoint, engine, weights):
    cast, cast_golden = cast_checkpoint
    reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
    weights.sync(cast, cast.label)
    reply_is(engine.control.resume(), 200, {"status": "resumed"})
    found = outputs(engine, 1, golden.HTTP_PROMPT, golden.TOKENS)
    problems = serves_problems(found, cast.label, {"A": goldens["A"], cast.label: cast_golden},
                               f"after the sync of {cast.label}")
    assert not problems, "; ".join(problems)
