"""Which weights sampled each token, as vLLM itself reports it: the weight-version spans of a
finished output (CompletionOutput.weight_versions; over HTTP on /inference/v1/generate), for a
request run before a sync, one held by a keep pause across it (where the transport has a pause),
and one run after it."""

import pytest

from fixtures.errors import HarnessError
from fixtures.judging.protocol_judges import answer_problems
from fixtures.judging.weight_judges import spanned_problems, switch_span_problems
from fixtures.protocol.capabilities import PAUSE
from fixtures.protocol.weights import SESSION

NEW_VERSION = "spans-B"


@pytest.mark.behaviour("weights/version-spans")
def test_version_spans(checkpoints, lifecycle, weight_sync):
    w, control = weight_sync, lifecycle.control
    old = w.version()
    problems = spanned_problems(w.spanned(), [old], "a request run before the sync")
    if PAUSE in lifecycle.missing:
        # LLM has no pause in 0.32/0.33: its caller syncs between requests.
        w.load(SESSION, checkpoints["B"], NEW_VERSION)
    else:
        size, before = w.start_held()  # long enough that the pause lands part way through it
        problems += answer_problems(control.pause("keep"))
        seen = w.held_progress()
        if seen == 0 or seen >= size:
            raise HarnessError(f"the request was not held part way at the pause ({seen}/{size} "
                               f"tokens): nothing would run across the sync")
        w.load(SESSION, checkpoints["B"], NEW_VERSION)
        problems += answer_problems(control.resume())
        held = w.held_end()
        if held is None:
            problems.append(f"the held request did not finish within {w.timeout:.0f} s of the resume")
        else:
            what = f"a request held by a keep pause across the sync ({seen} tokens at the pause)"
            problems += spanned_problems(held, [old, NEW_VERSION], what)
            if held.spans is not None:
                problems += switch_span_problems(held.spans, held.tokens, before, seen, what)
    problems += spanned_problems(w.spanned(), [NEW_VERSION], "a request run after the sync")
    assert not problems, "; ".join(problems)
