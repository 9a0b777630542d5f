"""verl#7846 on data parallelism: the KV wake resumes the engines, an explicit /resume right
after it (while requests arrive) must be a harmless no-op, and every request must finish."""

import pytest

from fixtures.judging.assertions import consensus_flags, finished_fully, reply_is
from fixtures.judging.topology_judges import SUCCESS_TOTAL, served_problems
from fixtures.observing.metrics import per_engine

MAX_TOKENS = 16
REQUESTS_PER_ENGINE = 4


@pytest.mark.behaviour("topology/kv-wake-then-resume")
@pytest.mark.topologies("dp2")
# A rank the wake skipped leaves the DP resume waiting for it forever: the server is wedged.
@pytest.mark.ends_shared_server_on_failure
def test_kv_wake_then_resume_under_traffic(topology_engine, topology):
    e, n = topology_engine, topology.engines
    reply_is(e.control.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(e.control.wake_up(["weights"]), 200, {"status": "sleeping"})

    before = per_engine(e.control.metrics_text(), SUCCESS_TOTAL, n)
    half = REQUESTS_PER_ENGINE * n // 2
    gens = [e.gen.start(f"before the kv wake {i}", MAX_TOKENS, stream=True) for i in range(half)]
    e.wait_load(at_least=half)
    reply_is(e.control.wake_up(["kv_cache"]), 200, {"status": "awake"})
    gens += [e.gen.start(f"between wake and resume {i}", MAX_TOKENS, stream=True) for i in range(half)]
    resumed = e.control.resume()
    reply_is(resumed, 200, {"status": "resumed"})
    gens += [e.gen.start(f"after resume {i}", MAX_TOKENS, stream=True) for i in range(half)]

    for i, gen in enumerate(gens):
        assert gen.done.wait(e.request_timeout), (
            f"request #{i} did not finish within {e.request_timeout:.0f} s of the KV wake and "
            f"/resume: {gen.summary()}")
        finished_fully(gen, MAX_TOKENS, f"request #{i} across the KV wake and /resume")
    flags = consensus_flags(e, "the KV wake and /resume")
    assert flags == (False, False), (
        f"after the KV wake and /resume: expected (is_sleeping, is_paused) = (False, False) on "
        f"every engine; observed {flags}")
    problems = served_problems(before, per_engine(e.control.metrics_text(), SUCCESS_TOTAL, n),
                               len(gens), "across the KV wake and /resume")
    assert not problems, "; ".join(problems)
