"""The topology axis: selection, core split, DP-class proof, the pure judges, catalog and
option checks, and the symptoms of the topology faults read off the judges' own messages."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest

from fixtures.axes.topologies import (
    MULTI_ENGINE,
    TOPOLOGIES,
    UnknownTopologyError,
    cpu_skip_reason,
    dp_rank_proven,
    select_topologies,
    split_cores,
    topology_named,
    tp_ranks_proven,
)
from fixtures.errors import ConfigError, HarnessError
from fixtures.in_target.tiny_model import DECLARED_EXPERTS, moe_declared
from fixtures.judging import topology_judges as tj
from fixtures.launching.config import build_config
from fixtures.observing import metrics, process_cpu
from fixtures.plugin import items
from fixtures.spec.catalog import CatalogError, coverage_problems, parse_catalog
from thresholds import Limit, load_limits
from vllm_lifecycle.faults import registry

ROOT = Path(__file__).resolve().parent.parent


def test_selection_keeps_catalog_order_and_names_unknown_ones():
    assert [t.name for t in select_topologies(None)] == ["single", "dp2", "api2", "tp2"]
    assert [t.name for t in select_topologies("api2, dp2,dp2")] == ["dp2", "api2"]
    with pytest.raises(UnknownTopologyError,
                       match="unknown topology 'dp3'; known topologies: single, dp2, api2, tp2"):
        select_topologies("dp2,dp3")
    with pytest.raises(UnknownTopologyError, match="no topology named"):
        select_topologies(" , ")


def test_the_option_is_one_line_error_and_certification_refuses_it():
    def make(options, env=None):
        return build_config(options.get, env or {}, Path("/tmp/suite-root"))

    with pytest.raises(ConfigError) as err:
        make({"--lifecycle-topologies": "dp4"})
    assert str(err.value).startswith("--lifecycle-topologies: unknown topology 'dp4'")
    assert "\n" not in str(err.value)
    assert [t.name for t in make({}, {"VLLM_LIFECYCLE_TOPOLOGIES": "dp2"}).topologies] == ["dp2"]
    with pytest.raises(ConfigError, match="not allowed together with --lifecycle-topologies"):
        make({"--lifecycle-topologies": "single", "--lifecycle-certify": "1"})


def test_launch_arguments_per_topology():
    assert topology_named("single").launch_args == ()
    assert topology_named("dp2").launch_args == ("--data-parallel-size", "2")
    assert topology_named("api2").launch_args == ("--api-server-count", "2")
    assert topology_named("tp2").launch_args == ("--tensor-parallel-size", "2")
    assert [t.moe_declared for t in TOPOLOGIES] == [False, True, False, False]
    assert [t.workers for t in TOPOLOGIES] == [1, 2, 1, 2]
    assert {"dp2", "tp2"} == MULTI_ENGINE  # a worker per core: the whole machine


def test_cores_split_per_rank_and_too_few_cores_skip_with_the_reason():
    assert split_cores([0, 1], 2) == [[0], [1]]
    assert split_cores([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert cpu_skip_reason(topology_named("dp2"), [0, 1]) is None
    assert cpu_skip_reason(topology_named("dp2"), [1]) == (
        "topology dp2 needs 2 CPU cores (one per engine); this process owns 1 (1)")
    assert cpu_skip_reason(topology_named("api2"), [1]) is None
    assert cpu_skip_reason(topology_named("tp2"), [0, 1]) is None
    assert cpu_skip_reason(topology_named("tp2"), [1]) == (
        "topology tp2 needs 2 CPU cores (one per worker); this process owns 1 (1)")


RANK_LINE = ("(Worker_DP{w} pid=1{w}) INFO [parallel_state.py:2350] rank {r} in world size {n} is "
             "assigned as DP rank {r}, PP rank 0, PCP rank 0, TP rank 0, ETP rank 0, EP rank {r}, "
             "EPLB rank N/A")
DP_LOG = "\n".join(RANK_LINE.format(w=r, r=r, n=2) for r in (0, 1))
# A dense model's ranks are reconfigured into DP worlds of their own.
DENSE_LOG = "\n".join(RANK_LINE.format(w=r, r=0, n=1) for r in (0, 1))


def test_the_dp_engine_class_is_proven_from_the_log_and_a_dense_dp_is_refused():
    assert dp_rank_proven(DP_LOG, 2) is None
    missing = dp_rank_proven(DENSE_LOG, 2)
    assert missing is not None and "'is assigned as DP rank 0,'" in missing and "DP rank 1" in missing
    assert dp_rank_proven(DP_LOG.splitlines()[0], 2) is not None  # one rank is not both


def test_every_tensor_parallel_worker_is_proven_from_the_log():
    log = ("(Worker_TP0 pid=10) INFO [cpu_model_runner.py:68] Starting to load model m\n"
           "(Worker_TP1 pid=11) INFO [cpu_model_runner.py:68] Starting to load model m\n")
    assert tp_ranks_proven(log, 2) is None
    assert tp_ranks_proven(log.replace("Worker_TP", "Worker_DP0_TP"), 2) is None  # with DP too
    assert tp_ranks_proven(log.splitlines()[0], 2) == "no line of a worker process of TP rank 1"
    assert tp_ranks_proven("(Worker pid=10) INFO rank 0 in world size 1", 2) == (
        "no line of a worker process of TP rank 0, 1")


def test_the_moe_declared_copy_declares_experts_and_keeps_the_rest(tmp_path):
    dense = tmp_path / "tiny"
    dense.mkdir()
    (dense / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "hidden_size": 8}')
    (dense / "model.safetensors").write_bytes(b"weights")
    declared = moe_declared(dense)
    assert declared.name == "tiny-moe-declared" and moe_declared(dense) == declared
    import json

    config = json.loads((declared / "config.json").read_text())
    assert config == {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, **DECLARED_EXPERTS}
    assert (declared / "model.safetensors").read_bytes() == b"weights"
    assert "num_local_experts" not in json.loads((dense / "config.json").read_text())


METRICS = """\
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 5.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="m"} 1.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} 2.0
# TYPE vllm:engine_sleep_state gauge
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="awake"} 0.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="weights_offloaded"} 1.0
vllm:engine_sleep_state{engine="0",model_name="m",sleep_state="discard_all"} 0.0
vllm:engine_sleep_state{engine="1",model_name="m",sleep_state="awake"} 1.0
vllm:engine_sleep_state{engine="1",model_name="m",sleep_state="weights_offloaded"} 0.0
vllm:engine_sleep_state{engine="1",model_name="m",sleep_state="discard_all"} 0.0
"""


def test_per_engine_counters_and_gauges():
    assert metrics.per_engine(METRICS, tj.SUCCESS_TOTAL, 2) == {"0": 6.0, "1": 2.0}
    assert metrics.per_engine(METRICS, tj.SUCCESS_TOTAL, 3)["2"] == 0.0
    seen = tj.gauges(METRICS, 2)
    assert seen == {"0": (0.0, 1.0, 0.0), "1": (1.0, 0.0, 0.0)}
    assert tj.gauge_problems({"0": (0.0, 1.0, 0.0), "1": (0.0, 1.0, 0.0)}, (0.0, 1.0, 0.0), "s") == []
    assert tj.gauge_problems(seen, (0.0, 1.0, 0.0), "/sleep?level=1") == [
        "after /sleep?level=1: expected vllm:engine_sleep_state (0.0, 1.0, 0.0) on every engine; "
        "observed engine 1: (1.0, 0.0, 0.0)"]


def test_every_engine_must_serve_its_share():
    before = {"0": 1.0, "1": 1.0}
    assert tj.served_problems(before, {"0": 5.0, "1": 5.0}, 8, "x") == []
    idle = tj.served_problems(before, {"0": 9.0, "1": 1.0}, 8, "after the full wake")
    assert len(idle) == 1 and idle[0].startswith("after the full wake: engine(s) 1 finished none")
    short = tj.served_problems(before, {"0": 4.0, "1": 3.0}, 8, "x")
    assert len(short) == 1 and "counted 5 successful requests of the 8 sent" in short[0]


def test_frontends_must_agree_and_held_requests_must_not_run():
    assert tj.frontend_problems({11: True, 12: True}, True, "/is_paused", "s") == []
    stale = tj.frontend_problems({11: True, 12: False}, True, "/is_paused", "/pause via pid 11")
    assert stale == ["after /pause via pid 11: expected /is_paused true on every API server; "
                     "observed pid 11: True, pid 12: False"]
    broken = tj.frontend_problems({11: "GET /is_paused -> 500 {} (0.01 s)"}, True, "/is_paused", "s")
    assert "pid 11: GET /is_paused -> 500" in broken[0]
    assert tj.held_problems([(0, False, 0), (1, False, 0)], 3.0, "s") == []
    ran = tj.held_problems([(0, False, 0), (1, True, 4), (2, False, 2)], 3.0, "during the pause")
    assert ran == ["during the pause: 2 of 3 request(s) ran while they should be held (within the "
                   "3.0 s hold window: #1 answered, #2 2 chunk(s))"]


def test_topology_fault_symptoms_match_the_judges_messages_and_not_others():
    stale = tj.frontend_problems({11: True, 12: False}, True, "/is_paused", "/pause?mode=abort")[0]
    assert re.search(registry.FRONTEND_STALE, stale)
    resumed = tj.frontend_problems({11: True, 12: False}, False, "/is_paused", "/resume")[0]
    assert re.search(registry.FRONTEND_STALE, resumed)  # a stale true after the resume
    agreed_wrong = tj.frontend_problems({11: False, 12: False}, True, "/is_paused", "/pause")[0]
    assert not re.search(registry.FRONTEND_STALE, agreed_wrong)  # both wrong: not this fault
    crashed = tj.frontend_problems({11: "GET /is_paused -> 500", 12: True}, True, "/is_paused", "x")[0]
    assert not re.search(registry.FRONTEND_STALE, crashed)
    left = tj.served_problems({"0": 0.0, "1": 0.0}, {"0": 8.0, "1": 0.0}, 8, "after the full wake")[0]
    for message in (left, "after /wake_up?tags=kv_cache: the engines gave no common answer: GET "
                          "/is_sleeping -> 500 'Internal Server Error' (0.01 s); GET /is_paused -> 200",
                    "POST /wake_up got no answer within 120 s"):
        assert re.search(registry.RANK_LEFT_ASLEEP, message), message
    assert not re.search(registry.RANK_LEFT_ASLEEP, "request did not end within 120 s of the abort")


CATALOG = """
behaviours:
  - id: topo/thing
    must: Every rank MUST follow.
    layer: contract
    source: spec
    status: required
    topologies: [dp2]
"""


def test_catalog_topologies_are_strict_and_the_tests_must_match():
    catalog = parse_catalog(CATALOG)
    assert catalog["topo/thing"].topologies == ("dp2",)
    with pytest.raises(CatalogError, match="unknown topologies"):
        parse_catalog(CATALOG.replace("[dp2]", "[dp9]"))
    assert coverage_problems(catalog, {"t::a": ["topo/thing"]}, True, topologies={"t::a": ("dp2",)}) == []
    wrong = coverage_problems(catalog, {"t::a": ["topo/thing"]}, True)
    assert wrong[0] == "t::a: runs 'topo/thing' on topologies single; the catalog declares dp2"


def _collect(*args: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "conformance", *args], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [ln for ln in proc.stdout.splitlines() if "::" in ln]


def test_dash_k_and_the_option_select_the_same_topology_instances():
    by_k = _collect("-k", "dp2")
    by_option = _collect("--lifecycle-topologies", "dp2")
    assert by_k and all("-dp2]" in ln or "-dp2-" in ln for ln in by_k)
    assert sorted(by_k) == sorted(by_option)



def _drain(**changes) -> tj.DrainRound:
    base = dict(round=1, paused=None, drain_seconds=0.0, drain_raised=None, running_after=False,
                resumed=None, finished={"late-1": "length", "fresh-1": "length"},
                expected_tokens=16, tokens={"late-1": 16, "fresh-1": 16})
    return tj.DrainRound(**(base | changes))


def test_the_drain_must_return_in_time_and_both_requests_finish():
    assert tj.drain_round_problems([_drain(), _drain(round=2, drain_seconds=5.0)], 15, 30) == []
    latched = tj.drain_round_problems([_drain(drain_seconds=30.0, running_after=True,
                                              drain_raised="TimeoutError: Timeout reached")], 15, 30)
    slow = tj.drain_round_problems([_drain(drain_seconds=20.0, running_after=True)], 15, 30)
    for message in (latched + slow):
        assert re.search(registry.DRAIN_LATCHED, message), message
    # After the resume: a lost held request, short output, a failed resume; none is the latch.
    others = tj.drain_round_problems([_drain(finished={"late-1": "no output", "fresh-1": "length"}),
                                      _drain(tokens={"late-1": 16, "fresh-1": 3}),
                                      _drain(resumed="raised RuntimeError: x (0.01 s)"),
                                      _drain(paused="raised RuntimeError: y (0.01 s)")], 15, 30)
    assert len(others) == 4
    assert not any(re.search(registry.DRAIN_LATCHED, m) for m in others), others
    assert "late-1" in others[0] and "3 tokens" in others[1]


def test_the_woken_while_paused_symptom_names_a_round_step_that_hung_or_overran():
    for message in ("round 1: POST /collective_rpc got no answer within 10 s",
                    "round 7: POST /resume took 12.30 s (limit 10 s)",
                    "round 3: POST /pause got no answer within 10 s",
                    "round 2: the request sent while paused did not finish within 30 s of /resume"):
        assert re.search(registry.WOKEN_WHILE_PAUSED, message), message
    for message in ("round 1: expected 200; observed POST /collective_rpc -> 500 {} (0.01 s)",
                    "the reference request before the first pause: request raised X",
                    "after 20 rounds of pause -> collective RPC -> resume: greedy output changed"):
        assert not re.search(registry.WOKEN_WHILE_PAUSED, message), message


QUIET_LIMIT = Limit("topology/quiescent-after-pause", "busy_cores_above_idle", "<=", 0.1, "cores", "r")


def test_quiescence_holds_each_engine_to_its_own_idle_reading():
    idle = {"VLLM::EngineCore_DP0": 0.005, "VLLM::EngineCore_DP1": 0.3}
    found = tj.quiescence(idle, {"VLLM::EngineCore_DP0": 0.09, "VLLM::EngineCore_DP1": 0.35},
                          QUIET_LIMIT, "after /pause?mode=abort on an idle engine")
    assert [(round(m.observed, 3), m.ok) for m in found] == [(0.085, True), (0.05, True)]
    stepping = tj.quiescence(idle, {"VLLM::EngineCore_DP0": 0.6, "VLLM::EngineCore_DP1": 0.3},
                             QUIET_LIMIT, "after /pause?mode=wait with a request running")
    beyond = [m.describe() for m in stepping if not m.ok]
    assert beyond == ["topology/quiescent-after-pause busy_cores_above_idle [after /pause?mode=wait "
                      "with a request running, VLLM::EngineCore_DP0; idle 0.005, then 0.6]: observed "
                      "0.595 cores, limit <= 0.1 (beyond by 0.495)"]
    assert re.search(registry.KEPT_WORKING, beyond[0])
    within = [m.describe() for m in found]
    assert not any(re.search(registry.KEPT_WORKING, m) for m in within)
    late = Limit("topology/quiescent-after-pause", "idle_pause_s", "<=", 2.0, "s", "r")
    assert re.search(registry.KEPT_WORKING, late.judge(2.75).describe())
    assert not re.search(registry.KEPT_WORKING, late.judge(0.1).describe())
    # The relative bound passes DP1's 0.3 cores "idle"; the reading at rest is bounded itself.
    rest = Limit("topology/quiescent-after-pause", "busy_cores_at_rest", "<=", 0.1, "cores", "r")
    assert [(m.observed, m.ok) for m in tj.at_rest(idle, rest)] == [(0.005, True), (0.3, False)]
    assert [m.describe() for m in tj.at_rest(idle, rest) if not m.ok] == [
        "topology/quiescent-after-pause busy_cores_at_rest [no request, not paused, "
        "VLLM::EngineCore_DP1]: observed 0.3 cores, limit <= 0.1 (beyond by 0.2)"]
    assert load_limits()["topology/quiescent-after-pause:busy_cores_at_rest"].limit == 0.1
    with pytest.raises(HarnessError, match="appeared after the idle reading"):
        tj.quiescence(idle, {"VLLM::EngineCore_DP2": 0.0}, QUIET_LIMIT, "x")


def test_busy_cores_tells_a_spinning_process_from_a_sleeping_one():
    spin = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 5\n"
                             "while time.time() < end: pass"])
    rest = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    procs = {"spin": psutil.Process(spin.pid), "rest": psutil.Process(rest.pid)}
    try:
        time.sleep(0.3)  # both past interpreter start
        seen = process_cpu.busy_cores(procs, 1.0)
    finally:
        for proc in (spin, rest):
            proc.kill()
            proc.wait()
    # The spinner's share depends on the machine's load (other runs beside this one); any
    # clear share of a core is told apart from the sleeper's none.
    assert seen["rest"] < 0.05 and seen["spin"] > max(0.05, 5 * seen["rest"]), seen
    with pytest.raises(HarnessError, match=r"spin \(pid \d+\) could not be read"):
        process_cpu.busy_cores({"spin": procs["spin"]}, 0.1)


def test_the_gauge_of_several_engines_counts_only_when_they_agree():
    assert tj.common_gauge({"0": (0.0, 1.0, 0.0), "1": (0.0, 1.0, 0.0)}) == (0, 1, 0)
    assert tj.common_gauge({"0": (0.0, 1.0, 0.0), "1": (1.0, 0.0, 0.0)}) is None
    assert tj.common_gauge({"0": (1.0, 0.0, 0.0), "1": None}) is None


# -- Engine.start_seen_on_server: a client starved of CPU may never see a request running ----
class _StarvedServer:
    def __init__(self) -> None:
        self.facts = {"decode_rate": 100.0, "max_model_len": 131072}

    def ensure_alive(self) -> None:
        pass


class _StarvedGen:
    """Requests shorter than `seen_from` tokens end (by their length) before /load sees them."""

    def __init__(self, seen_from: int, reason: str = "length") -> None:
        self.seen_from, self.reason, self.sizes = seen_from, reason, []

    def start(self, prompt, size):
        from fixtures.observing.client import Generation

        self.sizes.append(size)
        gen = Generation(stream=False, max_tokens=size)
        if size < self.seen_from:
            gen.finish_reasons = {0: self.reason}
            gen.done.set()
        return gen


class _Load:
    def __init__(self, gen: _StarvedGen) -> None:
        self.gen = gen

    def load(self) -> int:
        # Idle before the first request; a request counts while it runs unseen-to-the-end.
        return int(bool(self.gen.sizes) and self.gen.sizes[-1] >= self.gen.seen_from)


def _starved(seen_from: int, reason: str = "length"):
    from fixtures.observing.engine import Engine

    gen = _StarvedGen(seen_from, reason)
    return Engine(server=_StarvedServer(), variant=None, profile="0.32", platform="cpu",
                  control=_Load(gen), gen=gen, request_timeout=5.0), gen


def test_start_seen_on_server_retries_a_request_that_ended_unseen_twice_as_long():
    engine, gen = _starved(seen_from=1600)
    seen = engine.start_seen_on_server("p", within=0.2, settle=0.0)
    assert not seen.done.is_set() and gen.sizes == [800, 1600]
    [chance] = engine.chances
    assert chance.kind == "retried" and "ended by its length before /load saw it running" in chance.reason


def test_start_seen_on_server_gives_up_with_a_harness_error():
    engine, gen = _starved(seen_from=10**6)
    with pytest.raises(HarnessError, match="no request was seen running in 3 tries"):
        engine.start_seen_on_server("p", within=0.2, settle=0.0)
    assert gen.sizes == [800, 1600, 3200]
    engine, gen = _starved(seen_from=10**6, reason="abort")
    with pytest.raises(HarnessError, match="not by its length"):
        engine.start_seen_on_server("p", within=0.2, settle=0.0)
    assert gen.sizes == [800]


class _Deaf(_Load):
    def load(self) -> int:
        return 0  # answers, never counts the request


def test_an_alive_server_that_never_takes_the_request_fails_the_test():
    """Hole 12: not a harness error; the engine is up (it answers /load) and admits nothing."""
    engine, gen = _starved(seen_from=1)
    engine.control = _Deaf(gen)  # type: ignore[assignment]
    with pytest.raises(AssertionError, match=r"the server is alive and answered /load \d+ times in "
                                             r"0.[2-9] s, but never took the request \(/load 0 before"):
        engine.start_seen_on_server("p", within=0.2, settle=0.0)
    assert gen.sizes == [800] and engine.load_polls > 1


def test_wait_load_stops_once_the_request_was_answered():
    """held() on a request the engine already answered judges at once instead of polling /load
    for its whole timeout (the verdict is the same: answered while it should be held)."""
    engine, gen = _starved(seen_from=10**6)
    answered = gen.start("p", 10)
    began = time.monotonic()
    assert engine.wait_load(at_least=1, timeout=5.0, unless=answered.done.is_set) == 0
    assert time.monotonic() - began < 1.0


def test_stock_under_layered_explores_unshrunk_and_names_a_held_rejection():
    from hypothesis import Phase, settings

    import fixtures.plugin.options  # noqa: F401  (registers the profile)
    from detection import cases as detection

    case = next(c for c in detection.cases() if c.name == "stock-under-layered-dp2")
    assert case.pytest_args()[-4:] == ["--hypothesis-profile", "lifecycle-no-shrink",
                                       "--lifecycle-topology-explore-examples", "20"]
    assert Phase.shrink not in settings.get_profile("lifecycle-no-shrink").phases
    held = "request 3: no rejection within 5 s; the request was held instead"
    assert re.search(case.symptoms["topology/reference-model"], held)


# -- Engine.start_in_flight: a client starved past its look takes the request again once ------
class _LateGen:
    """Streams whose first chunk is there when the client looks, but the client looks late
    (the first `late` tries): each such try has ended by `reason` when it is seen."""

    def __init__(self, late: int, reason: str = "length") -> None:
        self.late, self.reason, self.tries = late, reason, 0

    def start(self, prompt, size, **kwargs):
        from fixtures.observing.client import Generation

        self.tries += 1
        gen = Generation(stream=True, max_tokens=size)
        gen.started = time.monotonic()
        gen.chunks.append((gen.started, "x"))
        if self.tries <= self.late:
            gen.started -= 60.0  # looked at a minute after it began
            gen.finish_reasons = {0: self.reason}
            gen.done.set()
        return gen


def _late(late: int, reason: str = "length"):
    from fixtures.observing.engine import Engine

    gen = _LateGen(late, reason)
    return Engine(server=_StarvedServer(), variant=None, profile="0.32", platform="cpu",
                  control=None, gen=gen, request_timeout=5.0), gen  # type: ignore[arg-type]


def test_start_in_flight_takes_a_late_look_again_as_a_second_chance():
    engine, gen = _late(late=1)
    confirmed, size = engine.start_in_flight("p")
    assert gen.tries == 2 and not confirmed.done.is_set() and size == 600
    [chance] = engine.chances
    assert chance.kind == "retried" and "in-flight try 1 of 2 not confirmed in time" in chance.reason


def test_start_in_flight_gives_up_after_its_tries_and_never_retries_an_odd_end():
    engine, gen = _late(late=2)
    with pytest.raises(HarnessError, match="could not confirm the request in flight"):
        engine.start_in_flight("p")
    assert gen.tries == 2
    engine, gen = _late(late=1, reason="abort")  # not ended by its length: reported as seen
    with pytest.raises(HarnessError, match="could not confirm the request in flight"):
        engine.start_in_flight("p")
    assert gen.tries == 1 and not engine.chances


class _SlowDeaf(_Load):
    """/load answers slowly: the first answer takes the whole window, still without the request."""

    def __init__(self, gen, slow_s: float) -> None:
        super().__init__(gen)
        self.slow_s, self.answers = slow_s, 0

    def load(self) -> int:
        self.answers += 1
        if self.answers == 2:  # the first poll after the request went out
            time.sleep(self.slow_s)
        return 0 if self.answers < 4 else 1


def test_a_server_slow_to_answer_load_is_watched_before_it_is_judged():
    """Detection (slow-consensus fault): /load answered once in the window, not yet counting
    the request; read at least MIN_LOAD_POLLS answers before calling it never taken."""
    engine, gen = _starved(seen_from=1)
    engine.control = _SlowDeaf(gen, slow_s=0.3)  # type: ignore[assignment]
    seen = engine.start_seen_on_server("p", within=0.2, settle=0.0)
    assert not seen.done.is_set() and seen.confirmed_at is not None and gen.sizes == [800]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
                    reason="needs Linux and two cores to tell pinned from free")
@pytest.mark.parametrize(("bind", "pinned"), [("0", {0}), ("0|1", None)])
def test_the_engine_core_is_pinned_for_one_engine_and_left_free_under_data_parallelism(bind, pinned):
    """A stand-in engine core (its own process group, titled as vLLM titles it): pinned to the
    worker's core for one engine; left on every core under DP, where pinning it beside vLLM's
    bound workers stalled every unpinned process on the machine."""
    from types import SimpleNamespace

    from fixtures.launching.environments import pin_engine_core
    from fixtures.launching.server import stop_process_group

    proc = subprocess.Popen(["bash", "-c", "exec -a VLLM::EngineCore_DP0 sleep 30"],
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while Path(f"/proc/{proc.pid}/cmdline").read_text().split("\0")[0] != "VLLM::EngineCore_DP0":
            assert time.monotonic() < deadline, "the stand-in never took its title"
            time.sleep(0.02)
        every = os.sched_getaffinity(proc.pid)
        server = SimpleNamespace(config=SimpleNamespace(env=(("VLLM_CPU_OMP_THREADS_BIND", bind),)),
                                 proc=proc, facts={})
        pin_engine_core(server)  # type: ignore[arg-type]
        assert os.sched_getaffinity(proc.pid) == (pinned or every)
        assert server.facts.get("engine_core_pinned") == (sorted(pinned) if pinned else None)
    finally:
        stop_process_group(proc, grace=2)


def _instance_item(topology: str, marker: dict[str, object] | None, round_: int = 1, *,
                   marks: tuple[SimpleNamespace, ...] = (), **params: object) -> SimpleNamespace:
    """A collected instance as fixtures/plugin/items.py reads it: `marker` its topology_params
    for every transport, `marks` any others."""
    spec = SimpleNamespace(id="-".join(map(str, params.values())), params={
        "topology": topology_named(topology), "lifecycle_round": round_, **params})
    found = [*marks]
    if marker is not None:
        found.append(SimpleNamespace(name=items.TOPOLOGY_PARAMS, args=(), kwargs=marker))
    return SimpleNamespace(callspec=spec, fixturenames=("topology_engine",), stash={}, nodeid="t::x",
                           iter_markers=lambda name: [m for m in found if m.name == name])


def test_beyond_one_engine_only_the_named_parameters_and_the_topology_rounds_run():
    narrowed = {"mode": ("abort", "wait", "keep"), "stream": True, "offline_engine": "AsyncLLM-MP1"}
    engine = SimpleNamespace(name="AsyncLLM-MP1")
    other = SimpleNamespace(name="AsyncLLM-MP0")

    def runs(topology: str, round_: int = 1, **params: object) -> bool:
        item = _instance_item(topology, narrowed, round_, **params)
        return items.runs_on_its_topology(item, repeat=2, topology_repeat=1)  # type: ignore[arg-type]

    assert runs("dp2", mode="keep", stream=True, offline_engine=engine)
    assert not runs("dp2", mode="keep-recompute", stream=True, offline_engine=engine)
    assert not runs("dp2", mode="keep", stream=False, offline_engine=engine)
    assert not runs("dp2", mode="keep", stream=True, offline_engine=other)  # named by its name
    assert runs("single", mode="keep-recompute", stream=False, offline_engine=other)
    # --lifecycle-repeat 2 with --lifecycle-topology-repeat 1: two rounds on one engine, one on dp2
    assert runs("single", 2, mode="keep", stream=False, offline_engine=other)
    assert not runs("dp2", 2, mode="keep", stream=True, offline_engine=engine)
    unmarked = _instance_item("dp2", None, mode="wait")
    assert items.runs_on_its_topology(unmarked, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(pytest.UsageError, match="names 'level', which the test does not take"):
        items.runs_on_its_topology(_instance_item("dp2", {"level": 1}, mode="wait"), 1, 1)  # type: ignore[arg-type]


def test_a_parameter_one_transport_alone_has_takes_one_value_on_the_others():
    offline = SimpleNamespace(name=items.TRANSPORT_PARAMS, args=("offline",), kwargs={"stream": True})
    http_dp2 = SimpleNamespace(name=items.TOPOLOGY_PARAMS, args=("http",), kwargs={"mode": ("keep",)})
    engine = SimpleNamespace(name="AsyncLLM-MP1")

    def runs(topology: str, **params: object) -> bool:
        item = _instance_item(topology, None, marks=(offline, http_dp2), **params)
        return items.runs_on_its_topology(item, 1, 1)  # type: ignore[arg-type]

    assert runs("single", mode="wait", stream=False, offline_engine=None)  # HTTP: every value
    assert not runs("single", mode="wait", stream=False, offline_engine=engine)  # on every topology
    assert runs("single", mode="wait", stream=True, offline_engine=engine)
    assert runs("dp2", mode="wait", stream=True, offline_engine=engine)  # the HTTP narrowing passes it by
    assert not runs("dp2", mode="wait", stream=True, offline_engine=None)
    assert runs("dp2", mode="keep", stream=False, offline_engine=None)


def test_the_custody_family_runs_one_dp2_instance_per_mode_and_call():
    dp2 = sorted(ln.split("::")[-1] for ln in _collect("-k", "MRV1-eager and dp2 and (pause_in_flight or "
                                                            "late_arrival or sleep_in_flight)"))
    modes = ("abort", "wait", "keep")
    assert dp2 == sorted([
        *(f"test_late_arrival[MRV1-eager-dp2-{m}-stream]" for m in modes),
        *(f"test_async_late_arrival[MRV1-eager-dp2-AsyncLLM-MP1-{m}]" for m in modes),
        *(f"test_pause_in_flight[MRV1-eager-dp2-http-{m}-stream-completions]" for m in modes),
        # The Python API's keep pause clears the cache: keep-recompute there.
        *(f"test_pause_in_flight[MRV1-eager-dp2-AsyncLLM-MP1-{m}-stream-completions]"
          for m in ("abort", "wait", "keep-recompute")),
        *(f"test_sleep_in_flight[MRV1-eager-dp2-level1-{m}]" for m in modes)])
    single = _collect("-k", "MRV1-eager and single and test_pause_in_flight[")
    # the single engine keeps its cross-product over HTTP, 4 modes x stream x api; each AsyncLLM
    # runs the three modes it has, streamed completions
    assert len(single) == 16 + 2 * 3
