"""The phased xdist scheduler: several-engine configs run alone (every other worker idle) and
first; the rest run side by side. The gating is pure; the scheduler is driven here with stand-in
workers through the calls xdist's controller makes."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fixtures.plugin.phases import (
    GROUPS_FILE,
    is_whole_machine,
    may_take,
    next_unit,
    phased_scheduler,
    read_groups,
    write_groups,
)


def test_whole_machine_groups_are_the_several_engine_topologies():
    assert is_whole_machine("MRV1-eager/http/dp2")
    assert is_whole_machine("MRV1-eager/AsyncLLM-MP1/dp2")
    assert not is_whole_machine("MRV1-eager/http")
    assert not is_whole_machine("MRV1-eager/http/api2")  # one engine behind two API servers
    assert not is_whole_machine("MRV1-eager/http/test_dp2_named_file.py")  # only the topology part


def test_a_whole_machine_unit_waits_for_every_other_worker():
    assert may_take("MRV1-eager/http/dp2", [0, 0], whole_pending_elsewhere=False)
    assert not may_take("MRV1-eager/http/dp2", [0, 3], whole_pending_elsewhere=False)


def test_whole_machine_units_are_handed_out_first_wherever_they_sit():
    queue = ["MRV1-eager/http", "MRV1-eager/http/dp2", "MRV1-eager/LLM-MP0"]
    assert next_unit(queue) == "MRV1-eager/http/dp2"
    assert next_unit(["MRV1-eager/http", "MRV1-eager/LLM-MP0"]) == "MRV1-eager/http"


def test_other_units_wait_while_a_whole_machine_unit_runs_elsewhere():
    assert may_take("MRV1-eager/http", [5], whole_pending_elsewhere=False)
    assert not may_take("MRV1-eager/http", [1], whole_pending_elsewhere=True)


class Quiet:
    """xdist's log producer, silent: any channel is a no-op."""

    def __getattr__(self, name: str) -> Quiet:
        return self

    def __call__(self, *args: object) -> None:
        return None


class Node:
    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


# The workers' order (the suite's: the single engine first, topologies later) and the group map
# they write: pytest 9 node IDs carry no "@group" suffix.
GROUPS = {f"conformance/t/test_a.py::t{n}": "MRV1-eager/http" for n in range(6)}
GROUPS |= {f"conformance/t/test_b.py::t{n}": "MRV1-eager/LLM-MP0" for n in range(4)}
GROUPS |= {f"conformance/t/test_off.py::t{n}": "MRV1-eager/AsyncLLM-MP1/dp2" for n in range(2)}
GROUPS |= {f"conformance/t/test_dp.py::t{n}": "MRV1-eager/http/dp2" for n in range(3)}
GROUPS |= {f"conformance/t/test_c.py::t{n}": "MRV1-eager/http/api2" for n in range(2)}


def _collection() -> list[str]:
    return list(GROUPS)


@pytest.mark.parametrize("reorder", [True, False], ids=["xdist-reorders-by-size", "collection-order"])
def test_the_scheduler_never_runs_a_whole_machine_unit_beside_anything(tmp_path, reorder):
    pytest.importorskip("xdist")
    groups = tmp_path / GROUPS_FILE
    write_groups(groups, GROUPS)
    config = SimpleNamespace(getvalue=lambda name: ["2*popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=reorder))
    sched = phased_scheduler(config, Quiet(), groups)
    nodes = [Node("gw0"), Node("gw1")]
    collection = _collection()
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.schedule()
    running: dict[Node, list[int]] = {n: [] for n in nodes}  # sent, not yet complete, in order
    order: list[tuple[str, str]] = []  # (worker, test) as they complete
    steps = 0
    while sched.has_pending and steps < 200:
        steps += 1
        done = {collection.index(t) for _, t in order}
        for node in nodes:
            running[node] = [i for i in node.sent if i not in done]
        busy = [n for n in nodes if running[n]]
        assert busy, "the scheduler left every worker idle with tests to run"
        whole_now = [n for n in busy if is_whole_machine(GROUPS[collection[running[n][0]]])]
        if whole_now:  # a whole-machine test is running: nobody else may have one in hand
            others = [n for n in busy if n is not whole_now[0]]
            assert not others, f"{[collection[running[n][0]] for n in others]} beside a whole-machine unit"
        node = busy[steps % len(busy)]
        index = running[node][0]
        order.append((node.gateway.id, collection[index]))
        sched.mark_test_complete(node, index)
    assert sorted(t for _, t in order) == sorted(collection)
    first_five = [t for _, t in order[:5]]
    assert all(is_whole_machine(GROUPS[t]) for t in first_five)
    # the rest was shared by both workers
    assert {w for w, t in order[5:]} == {"gw0", "gw1"}



def test_the_group_map_round_trips_and_a_missing_one_reads_empty(tmp_path):
    write_groups(tmp_path / "run" / GROUPS_FILE, {"a::t": "MRV1-eager/http"})
    assert read_groups(tmp_path / "run" / GROUPS_FILE) == {"a::t": "MRV1-eager/http"}
    assert read_groups(tmp_path / "nowhere.json") == {}


def test_a_worker_holds_no_unit_an_idle_worker_could_start(tmp_path):
    """A unit is a server start: a worker is handed its next one only once its last test is
    left, so small units at the end go to whichever worker frees first."""
    pytest.importorskip("xdist")
    groups_map = {f"conformance/t/test_big.py::t{n}": "MRV1-eager/http" for n in range(6)}
    groups_map |= {f"conformance/t/test_u{n}.py::t": f"MRV1-eager/http/own-{n}" for n in range(5)}
    groups = tmp_path / GROUPS_FILE
    write_groups(groups, groups_map)
    config = SimpleNamespace(getvalue=lambda name: ["1*popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=True))
    sched = phased_scheduler(config, Quiet(), groups)
    node, collection = Node("gw0"), list(groups_map)
    sched.add_node(node)
    sched.add_node_collection(node, collection)
    sched.schedule()
    done: list[int] = []
    while sched.has_pending and len(done) < len(collection):
        held = [i for i in node.sent if i not in done]
        assert len({groups_map[collection[i]] for i in held}) <= 2, "a worker hoards units"
        done.append(held[0])
        sched.mark_test_complete(node, held[0])
    assert sorted(done) == list(range(len(collection)))
