"""An RL run that serves LoRA adapters syncs its base weights under them. vLLM invalidates its
LoRA state when base weights are replaced; a request naming an adapter afterwards must be served
with that adapter on the new base, exactly as an engine started on the new checkpoint serves it."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.weight_judges import serves_problems
from fixtures.launching.recipes import LORA_NAME
from fixtures.observing.engine import Engine
from fixtures.observing.weight_sync import THERE_AND_BACK, WeightClient
from fixtures.plugin.checkpoints import ADAPTED, GOLDEN

ADAPTER = " with the adapter"  # a golden's label suffix: the adapter's output on that checkpoint


@pytest.mark.behaviour("weights/lora-follows-sync")
def test_lora_follows_sync(launch, lora_launch, checkpoints, run_state, target):
    config, on_b = lora_launch
    server = launch(config)
    engine = Engine.attach(server, server.config.variant, run_state.profile, target.platform,
                           run_state.config.request_timeout, run_state.shape)

    def served(model: str | None) -> list[int]:
        run = engine.gen.complete(golden.HTTP_PROMPT, golden.TOKENS,
                                  extra={"model": model} if model else None)
        server.ensure_alive()
        assert run.error is None, f"the golden prompt failed on {model or 'the base model'}: {run.summary()}"
        return list(run.token_ids)

    # This engine was started on A: its first answers are A's goldens, with and without the adapter.
    goldens = {"A": served(None), "A" + ADAPTER: served(LORA_NAME),
               "B": on_b[GOLDEN], "B" + ADAPTER: on_b[ADAPTED]}
    if len({tuple(tokens) for tokens in goldens.values()}) < len(goldens):
        raise HarnessError("the base model's and the adapter's outputs on A and on B are not four "
                           "distinct outputs: a sync that dropped the adapter could pass unseen; "
                           f"{goldens}")
    weights = WeightClient(engine.control, server.facts, run_state.config.weight_sync)
    problems: list[str] = []
    for way, label in THERE_AND_BACK:
        weights.held_sync(checkpoints[label], f"lora-{label}", way)
        step = f"after the {way} sync of {label}"
        problems += serves_problems({"the adapter": served(LORA_NAME)}, label + ADAPTER, goldens, step)
        problems += serves_problems({"the base model": served(None)}, label, goldens, step)
    assert not problems, "; ".join(problems)
