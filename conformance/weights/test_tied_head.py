"""Most RL-sized models tie lm_head to embed_tokens: their checkpoints hold no lm_head.weight,
and vLLM's loader reads embed_tokens for both. A sync of such a model must move the head with
the embeddings, and the reload must leave no part of it behind (stale, or still on meta)."""

from dataclasses import replace

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.engine import Engine
from fixtures.observing.weight_sync import THERE_AND_BACK, WeightClient, outputs


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
    for way, label in THERE_AND_BACK:
        weights.held_sync(checkpoints[label], f"tied-{label}", way)
        problems += served(f"after the {way} sync of the tied model's {label}")
    assert not problems, "; ".join(problems)
