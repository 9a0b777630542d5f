"""release_kv_cache_memory() through the Python API without a completed pause: refused, the
engine as it was, and a request in flight when it is refused runs on unchanged."""

import pytest

from fixtures.judging import delivery, judges
from fixtures.judging.offline_custody import finished_before_call
from fixtures.judging.offline_judges import (
    UnpausedRelease,
    unpaused_refusal_problems,
    unpaused_release_problems,
)
from fixtures.observing.offline import flight_rid

PROMPT = "A request after a KV-cache release that the engine had to refuse."
TOKENS = 48
AFTER_TIMEOUT_S = 30.0  # a 48-token request on an awake engine takes well under a second


@pytest.mark.behaviour("misuse/release-kv-needs-pause")
@pytest.mark.parametrize("work", ["idle", "streaming"])
def test_release_kv_unpaused_offline(offline, work):
    if work == "streaming":
        size, expected = offline.start_flights("delta", "running", (None,))
        offline.phase("released")
        problems = unpaused_refusal_problems(offline.call("release_kv_cache_memory"))
        if not offline.collect({flight_rid(None): "finished"}):
            problems.append(f"the request in flight did not finish within {offline.timeout:.0f} s "
                            f"of the refused release")
        outputs = offline.deliveries()[flight_rid(None)].outputs
        problems += [f"the request in flight: {p}"
                     for p in delivery.exactly_once_problems("delta", outputs, expected[None])]
        void = finished_before_call(outputs, "running", size, "release")
        problems = judges.standing_problems(problems, void)
        assert not problems, "; ".join(problems)
        return
    expected = offline.reference(PROMPT, TOKENS)
    released = offline.call("release_kv_cache_memory")
    flags = offline.flags()
    obs = UnpausedRelease(released, flags, None, None, expected)
    if all(v is False for v in flags.values()):  # else a request would only wait: judged as is
        offline.add("after", PROMPT, TOKENS, kind="final_only")
        offline.collect({"after": "finished"}, timeout=AFTER_TIMEOUT_S)
        seen = offline.deliveries()["after"]
        obs.outputs_after, obs.error_after = list(seen.outputs), seen.error
    problems = unpaused_release_problems(obs)
    assert not problems, "; ".join(problems)
