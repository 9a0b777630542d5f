"""The offline host's operations and the suite's client, with a fake API in place of vLLM."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import HTTPServer

import pytest

from fixtures.axes.offline_engines import BY_NAME, engines_named
from fixtures.errors import HarnessError
from fixtures.in_target import offline_apis, offline_host
from fixtures.judging.judges import standing_problems
from fixtures.judging.offline_custody import finished_before_call
from fixtures.judging.offline_judges import return_problems
from fixtures.observing.api_shape import ApiShape
from fixtures.observing.offline import IN_FLIGHT_TRIES, Called, Delivery, NotInFlightError, OfflineClient
from fixtures.protocol.drain import DrainObservation, drain_began_late


class FakeOutput:
    def __init__(self, rid: str, ids: list[int], finished: bool) -> None:
        self.request_id = rid
        self.finished = finished
        self.outputs = [type("C", (), {"token_ids": ids, "logprobs": None,
                                       "finish_reason": "length" if finished else None})()]


class FakeHost(offline_apis.Host):
    """Delivers each added request in two outputs; sleep(mode="wait") refuses like 0.32
    in-process does."""

    api = "LLM"

    def __init__(self) -> None:
        super().__init__()
        self.asleep = False
        self.pending: list[str] = []

    def progress(self) -> dict[str, int]:
        return {rid: 1 for rid in self.pending}

    def add(self, rid, prompt, max_tokens, kind, logprobs=None, rank=None):
        if kind not in offline_apis.KINDS:
            raise offline_apis.OpError(f"unknown output kind {kind!r}")
        self.history.setdefault(rid, [])
        self.pending.append(rid)

    def collect(self, until, timeout):
        for rid in list(self.pending):
            ids = [1, 2]
            self.deliver(FakeOutput(rid, ids[:1], False))
            self.deliver(FakeOutput(rid, ids, True))
            self.pending.remove(rid)
        return all(self.reached(r, u) for r, u in until.items())

    def settle(self, quiet):
        pass

    def call(self, method, kwargs, then=None):
        try:
            if method == "sleep":
                if kwargs.get("mode") == "wait":
                    raise ValueError("'wait' pause mode is not supported in inproc-engine mode")
                self.asleep = True
                return None
            if method == "wake_up":
                self.asleep = False
                return True
            if method == "is_sleeping":
                return self.asleep
            raise AttributeError(f"'LLM' object has no attribute {method!r}")
        finally:
            if then:
                self.phase = then

    def abort(self, rids):
        self.pending = [r for r in self.pending if r not in rids]


@dataclass
class FakeProcess:
    url: str
    facts: dict[str, object] = field(default_factory=dict)
    alive: bool = True

    def ensure_alive(self) -> None:
        if not self.alive:
            raise HarnessError("host exited")


class StarvedHost(FakeHost):
    """A host that sees a request shorter than `runs_from` tokens only once it has finished
    (a CPU-starved host takes a whole short request in at once)."""

    def __init__(self, runs_from: int) -> None:
        super().__init__()
        self.rate = 200.0  # tokens/s: the first in-flight request is 300 tokens
        self.runs_from = runs_from
        self.sizes: dict[str, int] = {}

    def add(self, rid, prompt, max_tokens, kind, logprobs=None, rank=None):
        super().add(rid, prompt, max_tokens, kind, logprobs, rank)
        self.sizes[rid] = max_tokens

    def collect(self, until, timeout):
        if all(u == "started" and self.sizes[r] >= self.runs_from for r, u in until.items()):
            return True  # seen running: progress() reports a token for it
        return super().collect(until, timeout)


def serve(host: offline_apis.Host) -> Iterator[OfflineClient]:
    server = HTTPServer(("127.0.0.1", 0), offline_host.make_handler(host))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    process = FakeProcess(f"http://127.0.0.1:{server.server_address[1]}")
    yield OfflineClient(process, BY_NAME["LLM-MP0"], timeout=10, shape=ApiShape())  # type: ignore[arg-type]
    server.shutdown()


@pytest.fixture
def client() -> Iterator[OfflineClient]:
    yield from serve(FakeHost())


def test_a_request_seen_only_finished_is_retried_longer():
    for starved in serve(StarvedHost(runs_from=1200)):
        size, expected = starved.start_in_flight("delta", "awake", queued=True)
        assert size == 1200 and expected == [1, 2]
        assert [(c.kind, c.reason) for c in starved.chances] == [
            ("retried", "in-flight request of 300 tokens finished before it was seen running; "
                        "retried with 600"),
            ("retried", "in-flight request of 600 tokens finished before it was seen running; "
                        "retried with 1200")]
        # The finished outputs of the earlier attempts were forgotten with them.
        assert starved.deliveries()["in-flight"].outputs == []


def test_a_request_never_seen_running_is_a_harness_error_after_the_last_attempt():
    for starved in serve(StarvedHost(runs_from=10**6)):
        last = 300 * 2 ** (IN_FLIGHT_TRIES - 1)
        with pytest.raises(NotInFlightError, match=rf"in-flight was not in flight \(0/{last} tokens\)"):
            starved.start_in_flight("delta", "awake")
        assert len(starved.chances) == IN_FLIGHT_TRIES - 1


def test_a_refusal_is_an_observation_not_a_host_error(client):
    called = client.call("sleep", level=1, mode="wait")
    assert called.raised == {"type": "ValueError",
                             "message": "'wait' pause mode is not supported in inproc-engine mode"}
    assert return_problems(called) and "raised ValueError" in return_problems(called)[0]
    missing = client.call("pause_generation", mode="abort")
    assert missing.raised and missing.raised["type"] == "AttributeError"


def test_the_phase_given_with_a_call_stamps_later_outputs(client):
    assert return_problems(client.call("sleep", then="asleep", level=1)) == []
    client.add("r", "a sentence", 2, "delta")
    assert client.collect({"r": "finished"})
    seen = client.deliveries()["r"]
    assert seen.phases() == ["asleep", "asleep"] and seen.outputs[-1]["finished"]
    assert return_problems(client.call("wake_up"), True) == []
    assert client.flags() == {"is_sleeping": False}


def test_malformed_operations_are_harness_errors(client):
    with pytest.raises(HarnessError, match="unknown operation"):
        client.op("teleport")
    with pytest.raises(HarnessError, match="not a lifecycle method"):
        client.call("shutdown")
    with pytest.raises(HarnessError, match="unknown output kind"):
        client.add("r", "p", 3, "sideways")
    with pytest.raises(HarnessError, match="unknown collect condition"):
        client.add("s", "p", 3, "delta")
        client.op("collect", until={"s": "someday"}, wait=1)


class WedgedHost(FakeHost):
    """A host whose engine never answers wake_up (it answers only once the test is over)."""

    def __init__(self) -> None:
        super().__init__()
        self.released = threading.Event()

    def call(self, method, kwargs, then=None):
        if method == "wake_up":
            self.released.wait(5)
        return super().call(method, kwargs, then)


def test_a_lifecycle_call_the_engine_never_answers_is_a_failure_not_a_harness_error():
    host = WedgedHost()
    for client in serve(host):
        client.timeout = 0.6
        with pytest.raises(AssertionError, match=r"^wake_up\(\) got no answer within 1 s$"):
            client.call("wake_up", tags=["kv_cache"])
        assert client.unanswered == "wake_up()"  # the fixture stops the host, not settles it
        host.released.set()


def test_baseline_wakes_and_forgets(client):
    client.call("sleep", level=1)
    client.add("left-over", "p", 2, "delta")
    assert client.to_baseline() == {"unfinished": ["left-over"], "was_sleeping": True}
    assert client.deliveries() == {}


def test_offline_engines_are_named_and_checked():
    assert [e.name for e in engines_named(("LLM-MP0", "AsyncLLM-MP1"))] == ["LLM-MP0", "AsyncLLM-MP1"]
    assert BY_NAME["AsyncLLM-MP0"].env == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    with pytest.raises(ValueError, match="unknown offline engine"):
        engines_named(("LLM-MP2",))


def test_host_arguments_are_strict():
    args = offline_host.parse_args(["--api", "AsyncLLM", "--model", "m", "--port", "1",
                                    "--enforce-eager", "--max-model-len", "4096"])
    assert args.api == "AsyncLLM" and args.enforce_eager and args.max_num_seqs == 1
    with pytest.raises(SystemExit):
        offline_host.parse_args(["--api", "vllm", "--model", "m", "--port", "1"])


def test_a_dead_host_is_reported_before_any_request(client):
    client.server.alive = False  # type: ignore[attr-defined]
    with pytest.raises(HarnessError, match="host exited"):
        client.flags()


def test_release_kv_cache_memory_reaches_the_api_as_a_lifecycle_call(client):
    # The fake API lacks it: what comes back is the API's own exception, not a host refusal.
    called = client.call("release_kv_cache_memory")
    assert called.raised and called.raised["type"] == "AttributeError"


def _drained(flight: list[str], waiting: list[str], raised: bool = False) -> DrainObservation:
    def outs(phases: list[str]) -> list[dict]:
        return [{"phase": p, "token_ids": [1] * (i + 1), "finished": i == len(phases) - 1,
                 "finish_reason": "length" if i == len(phases) - 1 else None}
                for i, p in enumerate(phases)]
    slept = Called("sleep", raised={"type": "ValueError", "message": "no"} if raised else None)
    return DrainObservation(
        kind="cumulative", size=400, reference=[1], waiting_reference=[1], slept=slept,
        woke=Called("wake_up", True), flight=Delivery("in-flight", outs(flight)),
        waiting=Delivery("waiting", outs(waiting)), waiting_progress_asleep=0)


def test_a_drain_that_began_after_the_request_finished_is_not_judged():
    over = drain_began_late(_drained(["awake", "awake"], ["awake", "draining"]))
    assert over == "the request in flight (400 tokens) had finished before the sleep was asked for"
    begun = drain_began_late(_drained(["awake", "draining"], ["awake", "woken"]))
    assert begun == "the queued request had begun before the sleep was asked for"


def test_a_drain_is_judged_whatever_the_engine_did_once_it_was_asked():
    # The queued request admitted during the drain is the engine's doing: judged, not retried.
    assert drain_began_late(_drained(["awake", "draining"], ["draining", "draining"])) is None
    assert drain_began_late(_drained(["awake", "draining"], ["woken", "woken"])) is None
    # A refusal is an observation too, even with the request over before it.
    assert drain_began_late(_drained(["awake", "awake"], [], raised=True)) is None


def test_an_offline_trial_whose_request_finished_before_the_call_is_an_error_not_a_failure():
    """The offline pause: a request whose last output reached the caller finished while the
    phase was still "running" ended before the pause was asked for."""
    ended = [{"phase": "running", "finished": False}, {"phase": "running", "finished": True}]
    problems = ["expected finish_reason 'abort' with fewer than 442 tokens; got 'length' with 442"]
    with pytest.raises(HarnessError, match=r"442 tokens\) had finished before the pause.*not judged"):
        standing_problems(problems, finished_before_call(ended, "running", 442, "pause"))
    # Finished after the pause was asked for: the pause's rule applied, the failure stands.
    later = [{"phase": "running", "finished": False}, {"phase": "resumed", "finished": True}]
    assert standing_problems(problems, finished_before_call(later, "running", 442, "pause")) == problems
    assert standing_problems([], finished_before_call(ended, "running", 442, "pause")) == []  # a pass stands
