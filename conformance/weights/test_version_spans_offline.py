"""Which weights sampled each token, as vLLM itself reports it: the weight-version spans of a
finished output (CompletionOutput.weight_versions) through LLM / AsyncLLM, for a request run
before a sync, one held by a keep pause across it (AsyncLLM), and one run after it."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging import golden
from fixtures.judging.offline_judges import return_problems
from fixtures.judging.weight_judges import span_problems, switch_span_problems
from fixtures.observing.engine import SETTLE_S
from fixtures.observing.offline import OfflineClient, run_to_end
from fixtures.observing.weight_sync import OfflineWeights

NEW_VERSION = "spans-B"


def run_span_problems(offline: OfflineClient, rid: str, labels: list[str], what: str) -> list[str]:
    out = run_to_end(offline, rid, golden.HTTP_PROMPT, golden.TOKENS).outputs[-1]
    return span_problems(out["weight_versions"], len(out["token_ids"]), labels, what)


@pytest.mark.behaviour("weights/version-spans")
def test_version_spans_offline(checkpoints, offline, offline_weights):
    w: OfflineWeights = offline_weights
    old = w.version()
    problems = run_span_problems(offline, "spans-before", [old], "a request run before the sync")
    if offline.engine.api != "AsyncLLM":
        # LLM has no pause in 0.32/0.33: its caller syncs between requests.
        w.push(checkpoints["B"], NEW_VERSION)
    else:
        # Long enough that the pause lands part way through it.
        size, before = offline.start_in_flight("cumulative", "running", size=offline.in_flight_tokens(3.0))
        problems += return_problems(offline.call("pause_generation", mode="keep"))
        offline.settle(SETTLE_S)
        seen = offline.progress("in-flight")
        if seen == 0 or seen >= size:
            raise HarnessError(f"the request was not held part way at the pause ({seen}/{size} "
                               f"tokens): nothing would run across the sync")
        w.push(checkpoints["B"], NEW_VERSION)
        problems += return_problems(offline.call("resume_generation"))
        if not offline.collect({"in-flight": "finished"}):
            problems.append(f"the held request did not finish within {offline.timeout:.0f} s of "
                            f"the resume")
        else:
            held = offline.deliveries()["in-flight"].outputs[-1]
            what = f"a request held by a keep pause across the sync ({seen} tokens at the pause)"
            spans = held["weight_versions"]
            problems += span_problems(spans, len(held["token_ids"]), [old, NEW_VERSION], what)
            if spans is not None:
                problems += switch_span_problems(spans, held["token_ids"], before, seen, what)
    problems += run_span_problems(offline, "spans-after", [NEW_VERSION], "a request run after the sync")
    assert not problems, "; ".join(problems)
