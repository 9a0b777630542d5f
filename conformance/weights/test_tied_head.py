"""Most RL-sized models tie lm_head to embed_tokens: their checkpoints hold no lm_head.weight,
and vLLM's loader reads embed_tokens for both. A sync of such a model must move the head with
the embeddings, and the reload must leave no part of it behind (stale, or still on meta)."""

from dataclasses import replace

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.engine import Engine
from fixtures.observing.weight_sync import WeightClient, outputs

# Each way there and back, ending on A: the session (the trainer's), then vLLM's own reload from
# a weights_path (no suite backend in the path).
STEPS = (("session", "B"), ("session", "A"), ("reload-from-path", "B"), ("reload-from-path", "A"))


@pytest.mark.behaviour("weights/tied-head-follows-sync")
def test_tied_head_follows_sync(launch, base_config, tied_checkpoints, run_state, target):
    checkpoints, goldens = tied_checkpoints
    server = launch(replace(base_config, model=str(checkpoints["A"].folder), label="tied-head"))
    engine = Engine.attach(server, server.config.variant, run_state.profile, target.platform,
                           run_state.config.request_timeout, run_state.shape)

    def served(step: str) -> list[str]:
        return serves_problems(outputs(engine, 1, golden.HTTP_PROMPT, golden.TOKENS), label, goldens, step)

    label = "A"
    start = served("at the start")
    if start:
        raise HarnessError("the tied-head engine does not serve its checkpoint A: " + "; ".join(start))
    weights = WeightClient(engine.control, server.facts, run_state.config.weight_sync)
    problems: list[str] = []
    for path, label in STEPS:
        reply_is(engine.control.pause(mode="keep"), 200, {"status": "paused"})
        if path == "session":
            weights.sync(checkpoints[label], f"tied-{label}")
        else:
            reload = weights.reload_from(checkpoints[label])
            assert reload.status == 200, f"reload_weights from {label} failed: {reload.describe()}"
        reply_is(engine.control.resume(), 200, {"status": "resumed"})
        problems += served(f"after the {path} sync of the tied model's {label}")
    assert not problems, "; ".join(problems)
