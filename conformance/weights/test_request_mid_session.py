"""A request that arrives in the middle of a weight-update session sent without a pause (half
the layers of checkpoint B loaded): whatever the release does with it, the engine must not die
and the request must not be answered with a mix the caller cannot see. It may fail with an
error reply, or complete with one checkpoint's golden output; no answer at all is a hang, not
a refusal. Once the session finishes the engine serves B."""

import pytest

from fixtures.errors import ServerDiedError
from fixtures.judging import golden
from fixtures.judging.assertions import serves as assert_serves
from fixtures.judging.weight_judges import mid_session_problems
from fixtures.observing.client import Generation
from fixtures.observing.weight_sync import layer_chunks, update_info


@pytest.mark.behaviour("weights/request-mid-session")
@pytest.mark.ends_shared_server_on_failure  # 0.27-0.32 lose the engine here (a finding)
def test_request_mid_session(goldens, checkpoints, engine, weights, note):
    b = checkpoints["B"]
    chunks = layer_chunks(b.tensor_names())
    half = max(1, len(chunks) // 2)
    assert weights.init().status == 200, "init_weight_transfer_engine was not accepted"
    assert weights.start().status == 200, "start_weight_update was not accepted"
    for chunk in chunks[:half]:
        reply = weights.update(update_info(b, chunk, 1))
        assert reply.status == 200, f"update_weights was not accepted: {reply.describe()}"
    try:
        run: Generation | None = engine.gen.complete(golden.HTTP_PROMPT, golden.TOKENS)
    except ServerDiedError:
        run = None  # the server went away under the request: judged by gone() below
    gone = engine.gone()
    what = f"a request sent mid-session (no pause, {half} of {len(chunks)} chunks of B loaded)"
    assert gone is None and run is not None, (
        f"{what} killed the engine: {gone}; the request "
        f"{run.summary() if run else 'got no reply: the server went away'}")
    problems, got = mid_session_problems(run, goldens, what)
    assert not problems, "; ".join(problems)
    note(f"the request sent mid-session was {got}")
    for chunk in chunks[half:]:
        reply = weights.update(update_info(b, chunk, 1))
        assert reply.status == 200, f"update_weights after the request was not accepted: {reply.describe()}"
    assert weights.finish("mid-B").status == 200, "finish_weight_update was not accepted"
    assert_serves(engine, 1, "B", goldens, "after the session the request interrupted")
