"""The offline host's operations and the suite's client, with a fake API in place of vLLM."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import HTTPServer

import pytest

from fixtures import offline_host
from fixtures.errors import HarnessError
from fixtures.offline import BY_NAME, OfflineClient, engines_named, returned


class FakeOutput:
    def __init__(self, rid: str, ids: list[int], finished: bool) -> None:
        self.request_id = rid
        self.finished = finished
        self.outputs = [type("C", (), {"token_ids": ids, "logprobs": None,
                                       "finish_reason": "length" if finished else None})()]


class FakeHost(offline_host.Host):
    """Delivers each added request in two outputs; sleep(mode="wait") refuses like 0.32
    in-process does."""

    api = "LLM"

    def __init__(self) -> None:
        super().__init__()
        self.asleep = False
        self.pending: list[str] = []

    def progress(self) -> dict[str, int]:
        return {rid: 1 for rid in self.pending}

    def add(self, rid, prompt, max_tokens, kind, logprobs=None):
        if kind not in offline_host.KINDS:
            raise offline_host.OpError(f"unknown output kind {kind!r}")
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


@pytest.fixture
def client() -> Iterator[OfflineClient]:
    server = HTTPServer(("127.0.0.1", 0), offline_host.make_handler(FakeHost()))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    process = FakeProcess(f"http://127.0.0.1:{server.server_address[1]}")
    yield OfflineClient(process, BY_NAME["LLM-MP0"], timeout=10)  # type: ignore[arg-type]
    server.shutdown()


def test_a_refusal_is_an_observation_not_a_host_error(client):
    called = client.call("sleep", level=1, mode="wait")
    assert called.raised == {"type": "ValueError",
                             "message": "'wait' pause mode is not supported in inproc-engine mode"}
    assert returned(called) and "raised ValueError" in returned(called)[0]
    missing = client.call("pause_generation", mode="abort")
    assert missing.raised and missing.raised["type"] == "AttributeError"


def test_the_phase_given_with_a_call_stamps_later_outputs(client):
    assert returned(client.call("sleep", then="asleep", level=1)) == []
    client.add("r", "a sentence", 2, "delta")
    assert client.collect({"r": "finished"})
    seen = client.deliveries()["r"]
    assert seen.phases() == ["asleep", "asleep"] and seen.outputs[-1]["finished"]
    assert returned(client.call("wake_up"), True) == []
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


def test_baseline_wakes_and_forgets(client):
    client.call("sleep", level=1)
    client.add("left-over", "p", 2, "delta")
    assert client.baseline() == {"unfinished": ["left-over"], "was_sleeping": True}
    assert client.deliveries() == {}


def test_offline_engines_are_named_and_checked():
    assert [e.name for e in engines_named(("LLM-MP0", "AsyncLLM-MP1"))] == ["LLM-MP0", "AsyncLLM-MP1"]
    assert BY_NAME["LLM-MP0"].in_process and not BY_NAME["AsyncLLM-MP0"].in_process
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
