"""A chunk the backend cannot load is refused, and the engine goes on serving the weights it
had before the session (an RL step whose sync fails must not lose the engine)."""

import pytest

from fixtures.errors import ServerDiedError
from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.client import Generation
from fixtures.observing.weight_sync import WeightClient

MISSING = "/nonexistent/checkpoint.safetensors"


@pytest.mark.behaviour("weights/failed-chunk-keeps-engine")
def test_failed_chunk_keeps_engine(goldens, checkpoints, isolated_engine):
    e = isolated_engine
    weights = WeightClient(e.control, e.server.facts)
    reply_is(e.control.pause(mode="keep"), 200, {"status": "paused"})
    assert weights.init().status == 200, "init_weight_transfer_engine was not accepted"
    assert weights.start().status == 200, "start_weight_update was not accepted"
    reply = weights.update({"path": MISSING, "names": None})
    assert reply.status != 200, f"a chunk naming a missing file was accepted: {reply.describe()}"
    reply_is(e.control.resume(), 200, {"status": "resumed"})
    try:
        run: Generation | None = e.gen.complete(golden.HTTP_PROMPT, golden.TOKENS)
    except ServerDiedError:
        run = None  # the server went away under the request: judged by gone() below
    gone = e.gone()
    assert gone is None, f"after the refused chunk the engine died: {gone}"
    assert run is not None and run.error is None, (
        f"after the refused chunk the engine no longer serves: the golden prompt "
        f"{type(run.error).__name__ if run else 'ServerDiedError'}: {str(run.error if run else '')[:200]}")
    problems = serves_problems({"the engine": run.token_ids}, "A", goldens, "after the refused chunk")
    assert not problems, "; ".join(problems)
