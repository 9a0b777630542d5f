"""The reply shapes of the sleep routes, judged apart from the behaviours they report."""

import pytest

CASES = [
    ("sleep level 1", lambda c: c.sleep(1), 200, {"status": "sleeping", "level": 1}),
    ("wake weights", lambda c: c.wake_up(["weights"]), 200, {"status": "sleeping", "tags": ["weights"]}),
    ("wake", lambda c: c.wake_up(), 200, {"status": "awake", "tags": None}),
    ("sleep level 3", lambda c: c.sleep("3"), 400, {"error": {"param": "query.level"}}),
    ("sleep mode foo", lambda c: c.sleep(mode="foo"), 400, {"error": {"param": "query.mode"}}),
]


def _has(body: object, expected: dict) -> bool:
    if not isinstance(body, dict):
        return False
    for key, value in expected.items():
        if isinstance(value, dict):
            if not _has(body.get(key), value):
                return False
        elif body.get(key, object()) != value:
            return False
    return True


@pytest.mark.behaviour("api/reply-bodies")
def test_reply_bodies(engine):
    problems = []
    for name, call, status, body in CASES:
        reply = call(engine.control)
        if reply.status != status or not _has(reply.body, body):
            problems.append(f"{name}: expected {status} {body}; observed {reply.describe()}")
    engine.control.wake_up()  # whatever the shapes, leave the engine awake
    assert not problems, "; ".join(problems)
