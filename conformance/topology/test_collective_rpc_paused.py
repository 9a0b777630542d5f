"""vLLM #39366 / prime-rl#2325 on data parallelism: while the engines are paused for a weight
update, a request that arrives sets off a START_DP_WAVE that every paused engine must drop; a
collective RPC (the weight load's shape) and the resume then complete, twenty times in a row.
Where the profile rejects the arrival (0.33), the request is refused at once and sent again after
/resume."""

import pytest

from fixtures.judging import judges
from fixtures.judging.assertions import finished_fully
from fixtures.observing.client import Reply
from fixtures.spec.profiles import PROFILES

ROUNDS = 20
MAX_TOKENS = 8
PROMPT = "Weights are loaded through a collective call while generation is paused"
# A profile that rejects the arrival (0.33: the retryable 503) does so at once.
REJECT_WITHIN_S = 5.0
# A harmless collective RPC: every rank's workers answer it (vllm/v1/worker/worker_base.py).
RPC = {"method": "check_health"}


def _step(e, n: int, limit: float, method: str, path: str, **kwargs) -> Reply:
    """One lifecycle step of round n, bounded by the limit: a hang is this failure, not a harness
    timeout, and a non-200 says which step of which round broke."""
    try:
        reply = e.control.call(method, path, timeout=limit, **kwargs)
    except AssertionError as exc:  # ControlPlane: "<METHOD> <path> got no answer within N s"
        raise AssertionError(f"round {n}: {exc}") from None
    assert reply.status == 200, f"round {n}: expected 200; observed {reply.describe()}"
    assert reply.seconds <= limit, (
        f"round {n}: {method} {path} took {reply.seconds:.2f} s (limit {limit:g} s)")
    return reply


@pytest.mark.behaviour("topology/collective-rpc-while-paused")
@pytest.mark.topologies("dp2")
# A rank woken while paused waits forever in an all-reduce: the server is left wedged.
@pytest.mark.ends_shared_server_on_failure
def test_collective_rpc_while_paused(topology_engine, limits):
    e = topology_engine
    limit = limits["topology/collective-rpc-while-paused:step_s"].limit
    reference = e.gen.complete(PROMPT, MAX_TOKENS)
    finished_fully(reference, MAX_TOKENS, "the reference request before the first pause")
    rejected = PROFILES[e.profile].late_arrival["abort"] == "rejected"
    for n in range(1, ROUNDS + 1):
        _step(e, n, limit, "POST", "/pause", params={"mode": "abort"})
        late = e.gen.start(f"{PROMPT} (round {n})", MAX_TOKENS, stream=True)
        if rejected:  # refused by the API server: the request is sent again after /resume
            assert late.done.wait(REJECT_WITHIN_S), (
                f"round {n}: profile {e.profile}: the request sent while paused was not rejected "
                f"within {REJECT_WITHIN_S:g} s: {late.summary()}")
            problems = judges.rejection_problems(late)
            assert not problems, f"round {n}: profile {e.profile}: " + "; ".join(problems)
        else:
            e.wait_load(at_least=1)  # it reached the API server: its wave request goes out now
        _step(e, n, limit, "POST", "/collective_rpc", json=RPC)
        _step(e, n, limit, "POST", "/resume")
        if rejected:
            late = e.gen.start(f"{PROMPT} (round {n})", MAX_TOKENS, stream=True)
        assert late.done.wait(e.request_timeout), (
            f"round {n}: the request sent while paused did not finish within "
            f"{e.request_timeout:.0f} s of /resume: {late.summary()}")
        finished_fully(late, MAX_TOKENS, f"round {n}: the request sent while paused")
    after = e.gen.complete(PROMPT, MAX_TOKENS)
    assert after.token_ids == reference.token_ids, (
        f"after {ROUNDS} rounds of pause -> collective RPC -> resume: greedy output changed; "
        f"expected token ids {reference.token_ids}, observed {after.token_ids}")
