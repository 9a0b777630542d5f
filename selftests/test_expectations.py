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
findings:
  - behaviour: area/thing-one
    scope: {profiles: ["0.32"], releases: "==0.32.*", variants: [MRV1-eager], params: [level1]}
    signature: 'the request ran while asleep'
    seen_on: x
    observed: y
tentative:
  - behaviour: area/thing-two
    scope: {profiles: ["0.32", "0.33"]}
    signature: 'sleep was accepted: 200'
    why: z
"""


def instance(**kw):
    base = {"profile": "0.32", "release": "0.32.0+cpu", "variant": "MRV1-eager", "transport": "http",
            "params": ("MRV1-eager", "level1")}
    return ex.Instance(**(base | kw))


def finding_for(inst):
    return ex.for_instance(ex.parse_expectations(FILE, CATALOG), "area/thing-one", "finding", inst)


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
    (FILE.replace("area/thing-one\n    scope", "area/thing-two\n    scope"), "needs a required behaviour"),
    (FILE.replace("releases: \"==0.32.*\"", "releases: \"0.32\""), "scope.releases"),
    (FILE.replace("variants: [MRV1-eager]", "variant: [MRV1-eager]"), "unknown scope keys"),
    (FILE.replace("    signature: 'sleep was accepted: 200'\n", ""), "missing \\['signature'\\]"),
    (FILE.replace("behaviour: area/thing-one", "behaviour: area/none"), "not a catalogued behaviour"),
])
def test_the_expectations_file_is_strict(text, message):
    with pytest.raises(CatalogError, match=message):
        ex.parse_expectations(text, CATALOG)


def test_the_real_file_loads_and_covers_every_tentative_behaviour():
    found = ex.load_expectations(load_catalog())
    assert {e.kind for e in found} == {"finding", "tentative"}


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
    nothing = judges.aborted(_gen(), 32)
    assert finding.matches("; ".join(nothing))
    # Cut after tokens arrived, errored, or ran to its end: not the finding.
    cut = judges.aborted(_gen(chunks=[(0.1, "a"), (0.2, "b")], finish_reasons={0: None}), 32)
    raised = judges.aborted(_gen(error=RuntimeError("HTTP 500")), 32)
    full = judges.aborted(_gen(finish_reasons={0: "length"}, completion_tokens=32), 32)
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
                          skipped=False)
    outcomes._apply_expectation(item, call, rep)  # type: ignore[arg-type]
    rep.passed, rep.failed, rep.skipped = (rep.outcome == o for o in ("passed", "failed", "skipped"))
    return rep


def test_plugin_turns_only_the_matching_judgement_into_the_finding():
    found, _ = finding_for(instance())
    expected = outcomes.Expected("required", found, ())
    assert results.outcome(_apply(AssertionError("the request ran while asleep"), expected)) == "finding"
    other = _apply(AssertionError("expected 200; observed 500"), expected)
    assert results.outcome(other) == "fail"
    assert "not the known finding" in (results.expectation_note(other) or "")
    # A harness error is never turned into the finding (it becomes an error elsewhere).
    crashed = _apply(RuntimeError("the request ran while asleep"), expected)
    assert not hasattr(crashed, "wasxfail")
    assert results.outcome(_apply(None, expected)) == "finding-fixed"


def test_plugin_tentative_failure_must_be_the_expected_one():
    tentative = ex.for_instance(ex.parse_expectations(FILE, CATALOG), "area/thing-two", "tentative",
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
