"""The human report and the certification bundle, on hand-made results."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import thresholds
from fixtures.errors import ConfigError
from fixtures.launching.config import build_config
from fixtures.reporting import report
from fixtures.spec import certify
from fixtures.spec.catalog import load_catalog
from fixtures.spec.record import Record

CATALOG = load_catalog()


def results_for(outcomes: dict[str, str] | None = None, **extra):
    """A run where every required behaviour (profile 0.32) passed on MRV1-eager."""
    outcomes = outcomes or {}
    records = []
    for bid, behaviour in sorted(CATALOG.behaviours.items()):
        if behaviour.status_for("0.32") != "required":
            continue
        for transport in behaviour.transports:
            records.append({"nodeid": f"conformance/x.py::t[MRV1-eager-{bid}-{transport}]",
                            "behaviour": bid, "variant": "MRV1-eager", "transport": transport,
                            "engine": "LLM-MP1" if transport == "offline" else None,
                            "outcome": outcomes.get(bid, "pass"), "message": ""})
    records.append({"nodeid": "conformance/x.py::t[MRV2-eager]", "behaviour": "flags/awake-baseline",
                    "variant": "MRV2-eager", "transport": "http", "outcome": "skip",
                    "message": "needs Triton"})
    base = {"certified": True, "profile": "0.32", "catalog_sha256": CATALOG.digest,
            "thresholds": {"file_sha256": "t" * 64, "overrides": {}}, "fault": None,
            "selection": {"behaviours": [], "layer": None}, "verdict": "CONFORMANCE PASS -- x",
            "suite": {"version": "0.1.0", "commit": "abc"}, "target": {"platform": "cpu"},
            "model": "/somewhere/tiny-llama-0123", "variants": ["MRV1-eager", "MRV2-eager"],
            "servers": {"starts": 1}, "results": records}
    return base | extra


def test_matrix_takes_the_worst_outcome_of_each_cell():
    records = [{"behaviour": "a/x", "variant": "V", "outcome": "pass"},
               {"behaviour": "a/x", "variant": "V", "outcome": "fail"},
               {"behaviour": "a/x", "variant": "W", "outcome": "skip"},
               {"behaviour": "t/y", "variant": "V", "outcome": "pass", "topology": "dp2"}]
    rows, variants, cells = report.matrix([Record.from_dict({"nodeid": "t", "transport": "http"} | r)
                                           for r in records])
    single, dp2 = ("a/x", "http", "single"), ("t/y", "http", "dp2")
    assert rows == [single, dp2] and variants == ["V", "W"]
    assert cells == {(single, "V"): "fail", (single, "W"): "skip", (dp2, "V"): "pass"}


def test_reports_carry_verdict_fingerprint_matrix_and_plots():
    results = results_for({"flags/sleep-level": "fail"})
    results["results"][0]["properties"] = {"rss_bytes_per_cycle": [2**30, 2**30 + 2**20]}
    md = report.render_markdown(results)
    assert md.startswith("# vLLM lifecycle conformance report") and "CONFORMANCE PASS" in md
    assert "| flags/sleep-level | http | single | fail |  |" in md  # MRV2-eager has no instance of it
    assert "| flags/sleep-level | offline LLM-MP1 | single | fail |  |" in md  # transport is a column
    assert "tiny-llama-0123" in md and "/somewhere" not in md  # no machine path in a report
    page = report.render_html(results)
    assert page.startswith("<!DOCTYPE html>") and 'id="matrix"' in page and "<svg" in page
    assert "host RSS across sleep/wake cycles" in page
    assert "<th>transport</th>" in page


def test_tentative_failures_and_findings_are_listed_with_their_transport():
    results = results_for()
    results["results"].append({"nodeid": "conformance/c.py::t[MRV1-eager-LLM-MP0]",
                               "behaviour": "custody/inproc-drain-before-offload",
                               "variant": "MRV1-eager", "transport": "offline", "engine": "LLM-MP0",
                               "outcome": "tentative-fail",
                               "message": "Failed: in-process sleep() raised ValueError: 'wait'"})
    for name, outcome, cause in (("custody/abort-held-request", "finding", "stream-abort"),
                                 ("custody/abort-before-first-token", "finding", "stream-abort"),
                                 ("mechanism/memory-freed-for-others", "platform-limit", "cpu-sleep")):
        results["results"].append({"nodeid": f"conformance/{name}.py::t", "behaviour": name,
                                   "variant": "MRV1-eager", "transport": "http", "outcome": outcome,
                                   "message": f"{name} failed", "properties": {"root_cause": cause}})
    md = report.render_markdown(results, {"stream-abort": "[Bug]: streams end with no finish_reason"})
    assert ("- custody/inproc-drain-before-offload (offline LLM-MP0, tentative-fail): Failed: "
            "in-process sleep() raised ValueError: 'wait'") in md
    # One heading per root cause holding its findings; platform limits and tentative ones apart.
    cause = md.index("### [Bug]: streams end with no finish_reason")
    platform = md.index(f"### {report.PLATFORM_GROUP}")
    tentative = md.index(f"### {report.TENTATIVE_GROUP}")
    assert cause < md.index("- custody/abort-held-request (http, finding)") < platform < tentative
    assert cause < md.index("- custody/abort-before-first-token (http, finding)") < platform
    assert platform < md.index("- mechanism/memory-freed-for-others (http, platform-limit)") < tentative
    assert "Known findings by root cause" in report.render_html(results)


def test_harness_retries_are_listed_per_test():
    results = results_for()
    results["results"][0]["notes"] = ["in-flight request of 705 tokens finished before it was "
                                      "seen running; retried with 1410"]
    nodeid = results["results"][0]["nodeid"]
    assert f"- `{nodeid}`: in-flight request of 705 tokens" in report.render_markdown(results)
    assert "<h2>Harness notes</h2>" in report.render_html(results)
    assert "Harness notes" not in report.render_markdown(results_for())


def test_a_complete_passing_run_certifies_and_gaps_do_not():
    assert certify.run_problems(results_for(), CATALOG) == []
    failed = certify.run_problems(results_for({"flags/sleep-level": "finding"}), CATALOG)
    assert failed == ["MRV1-eager: required flags/sleep-level (http) did not pass (finding)",
                      "MRV1-eager: required flags/sleep-level (offline) did not pass (finding)"]
    missing = results_for()
    missing["results"] = [r for r in missing["results"] if r["behaviour"] != "flags/full-wake"
                          or r["transport"] == "http"]
    assert certify.run_problems(missing, CATALOG) == [
        "MRV1-eager: required flags/full-wake (offline) did not run"]
    http_only = results_for(selection={"behaviours": [], "layer": None, "transports": ["http"]})
    assert any("deselected" in p for p in certify.run_problems(http_only, CATALOG))
    loosened = results_for(thresholds={"file_sha256": "t", "overrides": {"a:b": 1.0}}, fault="x")
    problems = certify.run_problems(loosened, CATALOG)
    assert any("overrides" in p for p in problems) and any("fault" in p for p in problems)


def make_bundle(folder: Path, results=None, product=True, scope: str | None = None) -> Path:
    """A sealed bundle; PRODUCT.yaml filled in as a vendor would, claiming the run's scope."""
    results = results or results_for()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "server-logs").mkdir(exist_ok=True)
    (folder / "server-logs" / "s.log").write_text("log\n")
    certify.seal(folder)
    if product:
        claimed = scope or results.get("certification_scope") or "full"
        (folder / certify.PRODUCT).write_text("vendor: V\nproduct: P\nversion: '1'\nhardware: H\n"
                                              f"contact: c@example.org\ncertification_scope: {claimed}\n")
    return folder


def test_the_checker_accepts_a_good_bundle(tmp_path):
    bundle = make_bundle(tmp_path / "b")
    assert certify.check_bundle(bundle, CATALOG, "t" * 64) == []
    assert certify.main(["check", str(bundle)]) == 1  # this suite's real thresholds hash differs


def test_the_checker_rejects_a_tampered_bundle(tmp_path):
    bundle = make_bundle(tmp_path / "b")
    text = (bundle / "results.json").read_text().replace('"fail"', '"pass"').replace("abc", "abd")
    (bundle / "results.json").write_text(text)
    (bundle / "extra.txt").write_text("added later")
    problems = certify.check_bundle(bundle, CATALOG, "t" * 64)
    assert "results.json: changed after the run (sha256 differs from the manifest)" in problems
    assert "extra.txt: not in the manifest" in problems


def test_the_checker_rejects_an_unfilled_product_or_a_plain_run(tmp_path):
    bundle = make_bundle(tmp_path / "b", product=False)
    assert "PRODUCT.yaml: vendor is not filled in" in certify.check_bundle(bundle, CATALOG, "t" * 64)
    plain = make_bundle(tmp_path / "p", results=results_for(certified=None))
    assert any("not made in certified mode" in p for p in certify.check_bundle(plain, CATALOG, "t" * 64))


URL = "http://127.0.0.1:8000"


def external_results(**extra):
    """A certified run against an external target, scope server: every HTTP behaviour it can
    reach passed; the Python API and the suite's own launches were not applicable."""
    records = []
    for bid, behaviour in sorted(CATALOG.behaviours.items()):
        if behaviour.status_for("0.32") != "required":
            continue
        for transport in behaviour.transports:
            for topology in behaviour.topologies:
                reachable = (transport == "http" and bid not in certify.OWN_SERVER_BEHAVIOURS
                             and topology == "single")
                records.append({"nodeid": f"conformance/x.py::t[MRV1-eager-{bid}-{topology}-{transport}]",
                                "behaviour": bid, "variant": "MRV1-eager", "transport": transport,
                                "topology": topology, "outcome": "pass" if reachable else "skip",
                                "message": "" if reachable else "not applicable to an external target"})
    base = results_for(target_url=URL, certification_scope="server", variants=["MRV1-eager"],
                       thresholds={"file_sha256": thresholds.file_digest(), "overrides": {}},
                       selection={"behaviours": [], "layer": None, "transports": ["http", "offline"]})
    base["results"] = records
    return base | extra


def test_the_server_scope_judges_http_behaviours_a_url_can_reach():
    assert certify.run_problems(external_results(), CATALOG) == []
    failed = external_results()
    next(r for r in failed["results"] if r["behaviour"] == "flags/sleep-level"
         and r["transport"] == "http")["outcome"] = "fail"
    assert certify.run_problems(failed, CATALOG) == [
        "MRV1-eager: required flags/sleep-level (http) did not pass (fail)"]
    # the same records judged as full: the offline and own-server behaviours did not run
    problems = certify.run_problems(external_results(certification_scope="full"), CATALOG)
    assert problems[0].startswith(f"certification scope full recorded, but the run tested the external "
                                  f"target {URL}")
    assert "MRV1-eager: required flags/full-wake (offline) did not pass (skip)" in problems
    assert "MRV1-eager: required security/dev-endpoints-gated (http) did not pass (skip)" in problems
    # a topology server is one the suite launches: full only
    assert "MRV1-eager: required topology/every-rank-follows (http) did not pass (skip)" in problems
    # a behaviour on one engine and on dp2: its dp2 instances are judged in the full scope only
    assert "MRV1-eager: required custody/late-arrival (http) did not pass (skip)" in problems
    single_failed = external_results()
    next(r for r in single_failed["results"] if r["behaviour"] == "custody/late-arrival"
         and r["topology"] == "single")["outcome"] = "fail"
    assert certify.run_problems(single_failed, CATALOG) == [
        "MRV1-eager: required custody/late-arrival (http) did not pass (fail)"]
    assert certify.run_problems(external_results(certification_scope="most"), CATALOG)[0].startswith(
        "unknown certification scope 'most'")


def _check(bundle: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "fixtures.spec.certify", "check", str(bundle)],
                          cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True,
                          timeout=120, check=False)
    return proc.returncode, proc.stdout


def test_the_checker_accepts_a_server_bundle_from_an_external_target_and_not_relabelled_full(tmp_path):
    bundle = make_bundle(tmp_path / "server", results=external_results())
    assert "certification_scope: server" in (tmp_path / "server" / certify.PRODUCT).read_text()
    code, out = _check(bundle)
    assert code == 0 and "bundle OK: may be published (certification scope server" in out, out
    # Relabelled full and resealed, as a forger would: what ran does not support the claim.
    relabelled = make_bundle(tmp_path / "full", results=external_results(certification_scope="full"))
    code, out = _check(relabelled)
    assert code == 1 and "REJECTED: certification scope full recorded, but the run tested" in out, out
    assert "REJECTED: MRV1-eager: required flags/full-wake (offline) did not pass (skip)" in out
    # The product card may not claim more than results.json recorded.
    card = make_bundle(tmp_path / "card", results=external_results(), scope="full")
    assert certify.check_bundle(card, CATALOG) == [
        "PRODUCT.yaml: certification_scope 'full' differs from the run's ('server' in results.json)"]
    bare = make_bundle(tmp_path / "bare", results=external_results())
    (bare / certify.PRODUCT).write_text("vendor: V\nproduct: P\nversion: '1'\nhardware: H\ncontact: c\n")
    assert certify.check_bundle(bare, CATALOG) == [
        "PRODUCT.yaml: certification_scope is missing (the run certified server)"]


def test_own_server_behaviours_are_exactly_the_tests_an_external_target_cannot_run():
    """Tests that launch a server of their own or inspect its process skip on an external target;
    the server scope leaves out exactly their behaviours."""
    own: set[str] = set()
    for path in sorted((Path(__file__).resolve().parent.parent / "conformance").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef) or not node.name.startswith("test"):
                continue
            args = {a.arg for a in node.args.args}
            calls = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name)}
            if args & {"launch", "isolated_server", "isolated_engine"} or "needs_own_process" in calls:
                own |= {d.args[0].value for d in node.decorator_list if isinstance(d, ast.Call)
                        and getattr(d.func, "attr", "") == "behaviour" and d.args
                        and isinstance(d.args[0], ast.Constant)}
    assert own == set(certify.OWN_SERVER_BEHAVIOURS)


def test_the_checker_cli_names_bad_usage(tmp_path, capsys):
    assert certify.main([]) == 2
    assert certify.main(["check", str(tmp_path / "none")]) == 2
    assert "not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--lifecycle-threshold", "--lifecycle-behaviours", "--lifecycle-layer",
                                    "--lifecycle-fault", "--lifecycle-variants"])
def test_certified_mode_refuses_what_would_loosen_it(option):
    values = {"--lifecycle-threshold": "mechanism/latency:sleep_seconds=9",
              "--lifecycle-behaviours": "flags/", "--lifecycle-layer": "contract",
              "--lifecycle-fault": "keep-aborts", "--lifecycle-variants": "MRV1-eager"}
    options = {"--lifecycle-certify": True, option: values[option]}
    with pytest.raises(ConfigError, match=f"--lifecycle-certify: not allowed together with {option}"):
        build_config(options.get, {}, Path("/tmp/suite-root"))
    assert build_config({"--lifecycle-certify": True}.get, {}, Path("/tmp/r")).certify
    assert build_config({}.get, {"VLLM_LIFECYCLE_CERTIFY": "1"}, Path("/tmp/r")).certify


def test_the_html_report_renders_in_a_headless_browser(tmp_path):
    import shutil
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(report.render_html(results_for({"flags/sleep-level": "fail"})))
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom",
                           page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'id="matrix"' in dom and 'id="fingerprint"' in dom and "flags/sleep-level" in dom
