"""The weight version is the last one committed: a finish that names one or
update_weight_version; nothing else moves it (a finish without one, a refused call, reload,
pause, sleep, wake). A finish with no session open must itself be refused: accepted, it would
commit a version no weights came with, and the version would read as if that were right."""

import pytest

from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import expected_version, version_problems


def reported_version_problems(weights, step: str) -> list[str]:
    return version_problems({"/weight_info": weights.version()}, expected_version(weights.calls), step)


@pytest.mark.behaviour("weights/version-follows-commits")
def test_version_follows_commits(goldens, checkpoints, engine, weights):
    c = engine.control
    # Every weight call the suite sent this server is on record: with none, "default".
    problems = reported_version_problems(weights, "at the start")
    reply_is(c.pause(mode="keep"), 200, {"status": "paused"})
    weights.push(checkpoints["A"], None)
    problems += reported_version_problems(weights, "after a finish without a version")
    weights.push(checkpoints["A"], "v-finish")
    problems += reported_version_problems(weights, "after a finish with version 'v-finish'")
    assert weights.set_version("v-set").status == 200, "update_weight_version was not accepted"
    problems += reported_version_problems(weights, "after update_weight_version 'v-set'")
    stray = weights.finish("v-refused")  # no session is open: refused, and must not commit its version
    if 200 <= stray.status < 300:
        problems.append(f"a finish without a session: accepted ({stray.describe()}), expected a refusal")
    problems += reported_version_problems(weights, "after a finish without a session")
    reload = weights.reload_from(checkpoints["A"])
    assert reload.status == 200, f"reload_weights failed: {reload.describe()}"
    problems += reported_version_problems(weights, "after collective_rpc reload_weights")
    reply_is(c.resume(), 200, {"status": "resumed"})
    for level in (1, 2):
        reply_is(c.sleep(level), 200, {"status": "sleeping", "level": level})
        problems += reported_version_problems(weights, f"while asleep at level {level}")
        reply_is(c.wake_up(), 200, {"status": "awake"})
        problems += reported_version_problems(weights, f"after the wake from level {level}")
    assert not problems, "; ".join(problems)
