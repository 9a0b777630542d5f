"""The weights/ judges and the trainer side's pure parts, on hand-made records."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from fixtures.judging.weight_judges import (
    Load,
    expected_loads,
    expected_version,
    fate,
    held_state_problems,
    operation_count_problems,
    rank_init_problems,
    rank_load_problems,
    refused_problems,
    serves_problems,
    side_effect_problems,
    span_problems,
    switch_span_problems,
    version_problems,
)
from fixtures.observing.sync_state import Seen, StateSnapshot
from fixtures.observing.weight_sync import (
    Checkpoint,
    WeightCall,
    layer_chunks,
    packed_chunks,
    tensor_names,
    update_info,
)

GOLDENS = {"A": [1, 2, 3, 4], "B": [5, 6, 7, 8]}


def call(route: str, body: object = None, status: int = 200) -> WeightCall:
    return WeightCall(route, body, status, {})


def test_version_is_default_until_committed() -> None:
    assert expected_version([]) == "default"
    assert expected_version([call("/start_weight_update"), call("/finish_weight_update", {})]) == "default"


def test_version_follows_accepted_commits_only() -> None:
    calls = [
        call("/finish_weight_update", {"weight_version": "v1"}),
        call("/update_weight_version", {"new_version": "v2"}),
        call("/finish_weight_update", {"weight_version": "refused"}, status=500),
        call("/update_weight_version", {"new_version": "refused"}, status=400),
        call("/finish_weight_update", {"weight_version": None}),
    ]
    assert expected_version(calls) == "v2"


def test_serves_the_expected_checkpoint() -> None:
    assert serves_problems({"the engine": [5, 6, 7, 8]}, "B", GOLDENS, "step") == []


def test_a_rank_left_on_old_weights_is_named() -> None:
    problems = serves_problems({"engine 0": [5, 6, 7, 8], "engine 1": [1, 2, 3, 4]}, "B", GOLDENS, "step")
    assert problems == ["step: engine 1 serves checkpoint A's output, expected B's"]


def test_a_mix_is_neither_checkpoint() -> None:
    problems = serves_problems({"the engine": [5, 6, 3, 4]}, "B", GOLDENS, "step")
    assert len(problems) == 1 and "neither checkpoint's output" in problems[0] and "position 2" in problems[0]


def test_refusal_must_be_a_4xx_naming_the_rule() -> None:
    assert refused_problems(400, {"detail": "start_weight_update first"}, "c", "start_weight_update") == []
    accepted = refused_problems(200, {}, "c", "start_weight_update")
    assert accepted and "accepted" in accepted[0]
    server = refused_problems(500, "start_weight_update must be called", "c", "start_weight_update")
    assert server == ["c: refused with 500 (a server error), expected a 4xx (the caller's error)"]
    unnamed = refused_problems(409, "conflict", "c", "start_weight_update")
    assert unnamed and "does not name" in unnamed[0]


def test_version_problems_name_every_disagreement() -> None:
    assert version_problems({"/weight_info": "v1"}, "v1", "s") == []
    assert version_problems({"/weight_info": "default"}, "v1", "s") == [
        "s: /weight_info reports weight version 'default', expected 'v1'"]


def test_operation_counts_one_per_accepted_call() -> None:
    assert operation_count_problems({"update": 2.0}, {"update": 5.0, "start": 1.0},
                                    {"update": 3, "start": 1}) == []
    problems = operation_count_problems({}, {"finish": 2.0}, {"finish": 1})
    assert problems and "'finish'" in problems[0]


def _safetensors(path: Path, names: list[str]) -> None:
    header = {name: {"dtype": "F32", "shape": [1], "data_offsets": [4 * i, 4 * i + 4]}
              for i, name in enumerate(names)}
    header["__metadata__"] = {"format": "pt"}
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * 4 * len(names))


def test_tensor_names_and_layer_chunks(tmp_path: Path) -> None:
    names = ["lm_head.weight", "model.layers.1.mlp.down_proj.weight", "model.embed_tokens.weight",
             "model.layers.0.self_attn.q_proj.weight", "model.layers.10.x.weight"]
    _safetensors(tmp_path / "model.safetensors", names)
    found = tensor_names(tmp_path / "model.safetensors")
    assert found == sorted(names)
    chunks = layer_chunks(found)
    assert chunks == [["model.layers.0.self_attn.q_proj.weight"], ["model.layers.1.mlp.down_proj.weight"],
                      ["model.layers.10.x.weight"], ["lm_head.weight", "model.embed_tokens.weight"]]


def test_update_info_is_a_list_per_engine_under_dp(tmp_path: Path) -> None:
    folder = tmp_path / "b"
    folder.mkdir()
    _safetensors(folder / "model.safetensors", ["x", "y"])
    ckpt = Checkpoint("B", folder)
    one = update_info(ckpt, ["x"], 1)
    assert one == {"path": str(folder / "model.safetensors"), "names": ["x"]}
    many = update_info(ckpt, ["x"], 2)
    assert isinstance(many, list) and len(many) == 2
    # Each engine's own file (so a worker reading another's entry loads a file the log names),
    # outside the model folder (vLLM loads every *.safetensors there), with the same weights.
    paths = [Path(entry["path"]) for entry in many]
    assert [p.name for p in paths] == ["B-dp0.safetensors", "B-dp1.safetensors"]
    assert all(p.parent != folder and p.read_bytes() == ckpt.file.read_bytes() for p in paths)
    assert [entry["names"] for entry in many] == [["x"], ["x"]]
    assert update_info(ckpt, ["x"], 2) == many  # made once, found again


def test_a_rebuilt_checkpoint_gets_fresh_engine_files(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "b"
    folder.mkdir()
    _safetensors(folder / "model.safetensors", ["x"])
    ckpt = Checkpoint("B", folder)
    first = ckpt.engine_file(1)
    (folder / "model.safetensors").unlink()
    _safetensors(folder / "model.safetensors", ["x", "y"])
    os.utime(folder / "model.safetensors", ns=(1, 1))
    assert ckpt.engine_file(1).read_bytes() == ckpt.file.read_bytes() != b""
    assert first == ckpt.engine_file(1)


# The tiny model's tensors (fixtures/in_target/tiny_model.py): two decoder layers of nine.
_LAYER = ["input_layernorm", "mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "post_attention_layernorm",
          "self_attn.k_proj", "self_attn.o_proj", "self_attn.q_proj", "self_attn.v_proj"]
TINY_NAMES = ["lm_head.weight", "model.embed_tokens.weight", "model.norm.weight"] + [
    f"model.layers.{i}.{part}.weight" for i in (0, 1) for part in _LAYER]


def _layer(name: str) -> int | None:
    return next((int(p) for p in name.split(".") if p.isdigit()), None)


def _split_layers(chunks: list[list[str]]) -> set[int]:
    """The layers whose tensors lie in more than one chunk."""
    return {layer for layer in {_layer(n) for n in TINY_NAMES} - {None}
            if sum(any(_layer(n) == layer for n in chunk) for chunk in chunks) > 1}


def _mixed_chunks(chunks: list[list[str]]) -> list[int]:
    """The chunks holding parts of two or more layers."""
    return [i for i, chunk in enumerate(chunks) if len({_layer(n) for n in chunk} - {None}) > 1]


def test_packed_chunks_split_a_layer_and_mix_two() -> None:
    assert len(TINY_NAMES) == 21
    packed = packed_chunks(TINY_NAMES)
    assert sorted(n for chunk in packed for n in chunk) == sorted(TINY_NAMES)  # each tensor once
    assert _split_layers(packed) and _mixed_chunks(packed)
    assert all(len(chunk) <= 5 for chunk in packed)
    # The checks can fail: the layer chunks split no layer and mix none.
    layered = layer_chunks(TINY_NAMES)
    assert not _split_layers(layered) and not _mixed_chunks(layered)


def test_packed_chunks_refuse_an_empty_chunk_size() -> None:
    import pytest

    with pytest.raises(ValueError, match="at least one tensor"):
        packed_chunks(TINY_NAMES, 0)


def _loaded(engine: int, count: int, file: str, prefix: str = "") -> str:
    """The line the suite's backend logs per chunk (vllm_lifecycle/weight_transfer/backend.py)."""
    return (f"{prefix}vllm-lifecycle-weights: loaded {count} tensor(s) from {file} "
            f"(dp{engine} pid {100 + engine})")


def _session_calls(route: str = "/update_weights") -> list[WeightCall]:
    chunks = [["a", "b"], ["c"]]
    return [call("/start_weight_update")] + [
        call(route, {"update_info": [{"path": f"/x/B-dp{i}.safetensors", "names": chunk} for i in (0, 1)]})
        for chunk in chunks] + [call(route, {"update_info": {"path": "/x/one", "names": ["z"]}}),
                                call(route, {"update_info": [{"path": "/x/no", "names": None}]}, 400)]


def test_expected_loads_are_each_engines_own_entries() -> None:
    want = {0: [Load("B-dp0.safetensors", 2), Load("B-dp0.safetensors", 1)],
            1: [Load("B-dp1.safetensors", 2), Load("B-dp1.safetensors", 1)]}
    assert expected_loads(_session_calls()) == want
    assert expected_loads(_session_calls("update_weights")) == want  # the Python API's record
    entry = {"update_info": [{"path": "/x/all.safetensors", "names": None}]}
    assert expected_loads([call("/update_weights", entry)]) == {0: [Load("all.safetensors", None)]}


def test_each_engine_loading_its_own_entries_passes() -> None:
    expected = expected_loads(_session_calls())
    log = ["INFO unrelated", _loaded(1, 2, "B-dp1.safetensors"), _loaded(0, 2, "B-dp0.safetensors"),
           _loaded(0, 1, "B-dp0.safetensors", "(EngineCore_DP0 pid=100) "),
           _loaded(1, 1, "B-dp1.safetensors")]
    assert rank_load_problems(log, expected, "s") == []
    # Two engines' lines run together in the shared log (one wrote its newline late).
    glued = [log[1] + log[2], *log[3:]]
    assert rank_load_problems(glued, expected, "s") == []


def test_an_engine_that_loaded_another_engines_entry_fails() -> None:
    expected = expected_loads(_session_calls())
    log = [_loaded(0, 2, "B-dp0.safetensors"), _loaded(1, 2, "B-dp0.safetensors"),
           _loaded(0, 1, "B-dp0.safetensors"), _loaded(1, 1, "B-dp0.safetensors")]
    assert rank_load_problems(log, expected, "the sync of B") == [
        "the sync of B: engine 1 loaded B-dp0.safetensors (engine 0's entry) in chunk 1, "
        "expected its own B-dp1.safetensors"]


def test_a_missing_extra_or_short_load_is_named() -> None:
    expected = expected_loads(_session_calls())
    own = [_loaded(0, 2, "B-dp0.safetensors"), _loaded(0, 1, "B-dp0.safetensors")]
    assert rank_load_problems(own, expected, "s") == ["s: engine 1 logged no load of its 2 chunk(s)"]
    short = [*own, _loaded(1, 2, "B-dp1.safetensors"), _loaded(1, 0, "B-dp1.safetensors")]
    assert rank_load_problems(short, expected, "s") == [
        "s: engine 1 loaded 0 tensor(s) from B-dp1.safetensors in chunk 2, its entry names 1"]
    once = [*own, _loaded(1, 2, "B-dp1.safetensors")]
    assert rank_load_problems(once, expected, "s") == ["s: engine 1 loaded 1 chunk(s), its entries are 2"]
    stray = [*own, *once[2:], _loaded(1, 1, "B-dp1.safetensors"), _loaded(2, 1, "other.safetensors")]
    assert rank_load_problems(stray, expected, "s") == ["s: engine 2 loaded 1 chunk(s), but no entry is its"]
    alien = [*own, _loaded(1, 2, "model.safetensors")]
    assert rank_load_problems(alien, expected, "s") == [
        "s: engine 1 loaded model.safetensors (no engine's entry) in chunk 1, "
        "expected its own B-dp1.safetensors"]


def _tp_loaded(rank: int, count: int, file: str) -> str:
    """The backend's load line from a tensor-parallel worker: its rank beside the DP index."""
    return (f"(Worker_TP{rank} pid={200 + rank}) vllm-lifecycle-weights: loaded {count} tensor(s) "
            f"from {file} (dp0 rank{rank} pid {200 + rank})")


def _tp_init(rank: int, trainer: str = "conformance-suite") -> str:
    return (f"(Worker_TP{rank} pid={200 + rank}) vllm-lifecycle-weights: init from trainer "
            f"{trainer!r} (dp0 rank{rank} pid {200 + rank})")


def test_under_tensor_parallelism_each_worker_must_load_its_own_entry() -> None:
    import re

    from vllm_lifecycle.faults.registry import INIT_MISSED_RANK, RANK_READ_OTHER_ENTRY

    # One engine of two workers: entry i is worker i's (vLLM: dp index * world size + rank).
    expected = expected_loads(_session_calls())
    own = [_tp_loaded(1, 2, "B-dp1.safetensors"), _tp_loaded(0, 2, "B-dp0.safetensors"),
           _tp_loaded(0, 1, "B-dp0.safetensors"), _tp_loaded(1, 1, "B-dp1.safetensors")]
    assert rank_load_problems(own, expected, "s", world=2) == []
    entry_0 = [_tp_loaded(0, 2, "B-dp0.safetensors"), _tp_loaded(1, 2, "B-dp0.safetensors"),
               _tp_loaded(0, 1, "B-dp0.safetensors"), _tp_loaded(1, 1, "B-dp0.safetensors")]
    found = rank_load_problems(entry_0, expected, "the sync of B", world=2)
    assert found == ["the sync of B: worker 1 loaded B-dp0.safetensors (worker 0's entry) in chunk 1, "
                     "expected its own B-dp1.safetensors"]
    assert re.search(RANK_READ_OTHER_ENTRY, found[0])
    alien = [*own[1:3], _tp_loaded(1, 2, "model.safetensors")]
    assert rank_load_problems(alien, expected, "s", world=2) == [
        "s: worker 1 loaded model.safetensors (no worker's entry) in chunk 1, "
        "expected its own B-dp1.safetensors"]
    # Two engines of two workers each: engine 1's rank 0 owns entry 2.
    assert rank_load_problems([_loaded(1, 2, "C.safetensors").replace("(dp1 ", "(dp1 rank0 ")],
                              {2: [Load("C.safetensors", 2)]}, "s", world=2) == []
    calls = [call("/init_weight_transfer_engine", {"init_info": {"trainer": "conformance-suite"}}),
             *_session_calls()]
    assert rank_init_problems([_tp_init(0), _tp_init(1), *own], calls, "s", world=2) == []
    missed = rank_init_problems([_tp_init(0), *own], calls, "the sync of B", world=2)
    assert missed == ["the sync of B: init_weight_transfer_engine never reached worker 1 "
                      "(no init logged before its first load)"]
    assert not re.search(INIT_MISSED_RANK, missed[0])  # the DP fault's symptom names an engine


def _init(engine: int, trainer: str = "conformance-suite") -> str:
    """The line the suite's backend logs when an init reaches a worker (backend.py)."""
    return f"vllm-lifecycle-weights: init from trainer {trainer!r} (dp{engine} pid {100 + engine})"


def test_the_sessions_init_must_reach_every_loading_engine_first() -> None:
    import re

    from vllm_lifecycle.faults.registry import INIT_MISSED_RANK

    calls = [call("/init_weight_transfer_engine", {"init_info": {"trainer": "conformance-suite"}}),
             *_session_calls()]
    loads = [_loaded(0, 2, "B-dp0.safetensors"), _loaded(1, 2, "B-dp1.safetensors")]
    assert rank_init_problems([_init(1), _init(0), *loads], calls, "s") == []
    assert rank_init_problems([_init(1) + _init(0), *loads], calls, "s") == []  # glued lines
    assert rank_init_problems(["INFO x", *loads], _session_calls(), "s") == []  # no init sent: not judged
    missed = rank_init_problems([_init(0), *loads], calls, "the sync of B")
    assert missed == ["the sync of B: init_weight_transfer_engine never reached engine 1's worker "
                      "(no init logged before its first load)"]
    assert re.search(INIT_MISSED_RANK, missed[0])
    late = rank_init_problems([_init(0), *loads, _init(1)], calls, "s")
    assert late == ["s: init_weight_transfer_engine never reached engine 1's worker (no init logged "
                    "before its first load)"]
    other = rank_init_problems([_init(0), _init(1, "someone-else"), *loads], calls, "s")
    assert other == ["s: engine 1's worker was initialised with trainer 'someone-else', the init sent "
                     "'conformance-suite'"]
    assert not re.search(INIT_MISSED_RANK, other[0])
    # the Python API's record names the method, not the route
    offline = [call("init_weight_transfer_engine", {"init_info": {"trainer": "conformance-suite"}}),
               *_session_calls("update_weights")]
    found = rank_init_problems([_init(0), *loads], offline, "s")
    assert found[0].startswith("s: init_weight_transfer_engine never")


def test_weight_fault_symptoms_match_only_their_own_judgement() -> None:
    import re

    from vllm_lifecycle.faults.registry import OLD_WEIGHTS_SERVED, RANK_MISSED, WEIGHTS_MIXED

    a, b = GOLDENS["A"], GOLDENS["B"]
    missed = "; ".join(serves_problems({"engine 0": b, "engine 1": a}, "B", GOLDENS, "s"))
    rank0 = "; ".join(serves_problems({"engine 0": a, "engine 1": b}, "B", GOLDENS, "s"))
    mixed = "; ".join(serves_problems({"the engine": [5, 6, 3, 4]}, "B", GOLDENS, "s"))
    old = "; ".join(serves_problems({"the engine": [1, 2, 3, 4]}, "B", GOLDENS, "s"))
    assert re.search(RANK_MISSED, missed) and not re.search(RANK_MISSED, rank0)
    assert not re.search(RANK_MISSED, mixed) and not re.search(RANK_MISSED, old)
    assert re.search(WEIGHTS_MIXED, mixed) and not re.search(WEIGHTS_MIXED, old)
    assert re.search(OLD_WEIGHTS_SERVED, old) and not re.search(OLD_WEIGHTS_SERVED, mixed)


def test_one_switch_from_old_run_to_new_continuation_explains_a_held_request() -> None:
    from fixtures.judging.weight_judges import switch_problems

    before = [1, 2, 3, 4, 5, 6]
    tokens = [1, 2, 3, 9, 9, 9]  # A's run for three tokens, then B's continuation
    assert switch_problems(tokens, before, {3: [9, 9, 9]}) == []
    # B's first token happened to equal A's: the switch is earlier than the first difference.
    assert switch_problems([1, 2, 3, 4, 8, 8], before, {4: [7, 7], 3: [4, 8, 8]}) == []


def test_a_continuation_on_stale_state_is_no_single_switch() -> None:
    import re

    from fixtures.judging.weight_judges import switch_problems
    from vllm_lifecycle.faults.registry import STALE_KV_MIX

    problems = switch_problems([1, 2, 3, 7, 7, 7], [1, 2, 3, 4, 5, 6], {3: [9, 9, 9], 2: [3, 9, 9, 9]})
    assert len(problems) == 1 and "switch points tried: 2, 3" in problems[0]
    assert re.search(STALE_KV_MIX, problems[0])
    # a prefix that is not the old run's is no switch either
    assert switch_problems([1, 5, 3, 9, 9, 9], [1, 2, 3, 4, 5, 6], {3: [9, 9, 9]})


def test_an_aborted_request_holds_only_the_old_runs_prefix() -> None:
    from fixtures.judging.weight_judges import old_prefix_problems

    assert old_prefix_problems([1, 2], [1, 2, 3, 4], "cut") == []
    assert "token 1 is unlike the old weights' uninterrupted run" in old_prefix_problems(
        [1, 9], [1, 2, 3, 4], "cut")[0]
    assert "the abort did not cut it" in old_prefix_problems([1, 2, 3, 4], [1, 2, 3, 4], "cut")[0]


def test_a_cleared_cache_reuses_nothing_and_gives_the_fresh_run() -> None:
    from fixtures.judging.weight_judges import reused_prefix_problems

    assert reused_prefix_problems([5, 6], [5, 6], [1, 2], 0, True, "p") == []
    stale = reused_prefix_problems([5, 9], [5, 6], [1, 2], 48, True, "p")
    assert "48 prompt tokens were served from a prefix cache the path clears" in stale[0]
    assert "leaves the new weights' fresh run at token 1" in stale[1]
    missing = reused_prefix_problems([5], [5], [1], None, True, "p")
    assert "no prompt_tokens_details.cached_tokens" in missing[0]


def test_a_kept_cache_may_change_output_only_where_the_reuse_shows() -> None:
    from fixtures.judging.weight_judges import reused_prefix_problems

    assert reused_prefix_problems([5, 9], [5, 6], [1, 2], 48, False, "p") == []  # reuse reported
    assert reused_prefix_problems([5, 6], [5, 6], [1, 2], 0, False, "p") == []
    unseen = reused_prefix_problems([5, 9], [5, 6], [1, 2], 0, False, "p")
    assert "leaves the new weights' fresh run at token 1 with 0 cached prompt tokens" in unseen[0]


def test_a_prompt_after_a_sync_that_never_landed_fails_on_every_path() -> None:
    """The engine still on A: the prompt gives A's fresh run (the cache cleared, or kept and
    reused: A's own prefix under A's weights). B's fresh run from an engine started on B tells
    it apart; a "fresh" run taken from the same engine after the sync would be A's run too."""
    import re

    from fixtures.judging.weight_judges import reused_prefix_problems
    from vllm_lifecycle.faults.registry import OLD_FRESH_RUN, STALE_PREFIX_REUSED

    old, fresh = [1, 2, 3], [5, 6, 7]
    for cached, cleared in ((0, True), (48, False)):
        problems = reused_prefix_problems(old, fresh, old, cached, cleared, "p")
        assert len(problems) == 1 and re.search(OLD_FRESH_RUN, problems[0])
        assert not re.search(STALE_PREFIX_REUSED, problems[0])
        # the same history judged against the judged engine's own run after the sync passes
        assert reused_prefix_problems(old, old, old, cached, cleared, "p") == []


def test_a_session_lands_is_refused_before_loading_or_is_partial() -> None:
    from fixtures.judging.weight_judges import session_outcome

    ok = [call("/init_weight_transfer_engine"), call("/start_weight_update"),
          call("/update_weights"), call("/finish_weight_update")]
    assert session_outcome(ok) == "landed"
    assert session_outcome([call("/init_weight_transfer_engine"),
                            call("/start_weight_update", status=409)]) == "refused"
    assert session_outcome([call("/init_weight_transfer_engine"), call("/start_weight_update"),
                            call("/update_weights", status=500), call("/finish_weight_update")]) == "refused"
    assert session_outcome([*ok[:3], call("/update_weights", status=500)]) is None


def test_try_push_stops_at_a_refusal_and_closes_the_session(tmp_path: Path) -> None:
    from fixtures.observing.client import Reply
    from fixtures.observing.weight_sync import WeightClient

    header = json.dumps({"model.layers.0.w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                         "model.layers.1.w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}).encode()
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(8))

    class Control:
        def __init__(self, refuse: str) -> None:
            self.refuse, self.sent = refuse, []

        def call(self, method, route, json=None):
            self.sent.append(route)
            refused = route == self.refuse and self.sent.count(route) == 2
            return Reply(method, route, 500 if refused else 200, {}, 0.0)

    control = Control("/update_weights")
    client = WeightClient(control, {})  # type: ignore[arg-type]
    calls = client.try_push(Checkpoint("B", folder), "v")
    assert [c.route for c in calls] == ["/init_weight_transfer_engine", "/start_weight_update",
                                        "/update_weights", "/update_weights", "/finish_weight_update"]
    assert [c.status for c in calls] == [200, 200, 200, 500, 200]


def test_spans_must_tile_the_tokens_once_with_the_committed_labels() -> None:
    assert span_problems([["a", 0, 5]], 5, ["a"], "x") == []
    assert span_problems([["a", 0, 2], ["b", 2, 5]], 5, ["a", "b"], "x") == []
    assert span_problems(None, 5, ["a"], "x") == [
        "x: the finished output carries no weight_versions (5 tokens)"]
    gap = span_problems([["a", 0, 2], ["b", 3, 5]], 5, ["a", "b"], "x")
    assert len(gap) == 1 and "do not tile" in gap[0]
    overlap = span_problems([["a", 0, 3], ["b", 2, 5]], 5, ["a", "b"], "x")
    assert len(overlap) == 1 and "do not tile" in overlap[0]
    empty = span_problems([["a", 0, 0], ["b", 0, 5]], 5, ["a", "b"], "x")
    assert len(empty) == 1 and "do not tile" in empty[0]
    short = span_problems([["a", 0, 4]], 5, ["a"], "x")
    assert short == ["x: the spans cover tokens [0, 4) of 5: [('a', 0, 4)]"]
    assert span_problems([["a", 0, 5]], 5, ["a", "b"], "x") == [
        "x: the spans are labelled ['a'], expected ['a', 'b'] (the versions committed while it "
        "ran): [('a', 0, 5)]"]
    assert "not (version, start, end)" in span_problems([["a", 0]], 5, ["a"], "x")[0]


def test_the_switch_lies_between_the_pause_and_the_first_new_token() -> None:
    before = [1, 2, 3, 4, 5, 6]
    tokens = [1, 2, 3, 9, 9, 9]  # B's tokens from position 3
    assert switch_span_problems([["a", 0, 3], ["b", 3, 6]], tokens, before, 3, "x") == []
    # B's first token may equal A's: a switch before the first difference is consistent.
    assert switch_span_problems([["a", 0, 2], ["b", 2, 6]], tokens, before, 2, "x") == []
    early = switch_span_problems([["a", 0, 1], ["b", 1, 6]], tokens, before, 3, "x")
    assert early == ["x: the new version's span starts at token 1, but 3 tokens were produced "
                     "before the pause (under the old weights)"]
    late = switch_span_problems([["a", 0, 5], ["b", 5, 6]], tokens, before, 3, "x")
    assert late == ["x: token 3 is labelled with the old version but is unlike the old weights' "
                    "uninterrupted run (the switch labelled at 5)"]
    assert switch_span_problems([["a", 0, 6]], tokens, before, 3, "x") == []


def test_a_held_request_that_stayed_on_the_old_weights_fails() -> None:
    from fixtures.judging.weight_judges import held_request_problems, held_switch_candidates

    before = [1, 2, 3, 4, 5, 6]
    # Held at 3 of 6 tokens (2 seen when the pause returned), then only A's tokens: B's own
    # continuation from 3 or 2 is something else, so nothing after the resume ran under B.
    assert held_switch_candidates(before, before, 2, 3) == [3, 2]
    problems = held_request_problems(before, before, 6, 2, 3, {3: [9, 9, 9], 2: [3, 9, 9, 9]})
    assert problems == ["the held request ran on with only the old weights' tokens after the sync "
                        "(2 tokens seen when the pause returned, 3 of 6 once it settled): the "
                        "tokens after the resume are the old weights' run, not the new weights' "
                        "continuation"]
    # Unless B's own continuation is A's tail: then the tokens are explained.
    assert held_request_problems(before, before, 6, 2, 3, {3: [4, 5, 6], 2: [3, 9, 9, 9]}) == []


def test_a_sync_that_never_landed_fails_against_b_s_windowed_continuations() -> None:
    """The references as the goldens give them: A's run only as long as the switch points and
    their window, B's continuation from every switch point a window long, more points than the
    candidates. The engine on A all along gives A's run past both: a fail, with the symptom
    detection reads. Its own continuations after the sync (A's) would have explained it."""
    import re

    from fixtures.judging.weight_judges import held_request_problems
    from vllm_lifecycle.faults.registry import HELD_ON_OLD_WEIGHTS, STALE_KV_MIX

    a_run = [1, 2, 3, 4, 5, 6, 7, 8]  # switch points 1..6, window 2
    tokens = [*a_run, 9, 9, 9, 9]  # the request ran to 12 tokens, past A's reference
    b_windows = {s: [20 + s, 30 + s] for s in range(1, 7)}
    problems = held_request_problems(tokens, a_run, 12, 2, 3, b_windows)
    assert len(problems) == 1 and re.search(HELD_ON_OLD_WEIGHTS, problems[0])
    assert not re.search(STALE_KV_MIX, problems[0])
    own = {s: a_run[s:s + 2] for s in range(1, 7)}
    assert held_request_problems(tokens, a_run, 12, 2, 3, own) == []


def test_a_window_of_b_s_continuation_explains_a_held_request() -> None:
    from fixtures.judging.weight_judges import held_request_problems

    a_run = [1, 2, 3, 4, 5, 6, 7, 8]
    b_windows = {s: [20 + s, 30 + s] for s in range(1, 7)}
    # Held at 3: A's 3 tokens, then B's window from 3; what follows the window is not judged.
    assert held_request_problems([1, 2, 3, 23, 33, 0, 0, 0, 0], a_run, 9, 2, 3, b_windows) == []
    # The window itself wrong: a mix.
    assert held_request_problems([1, 2, 3, 23, 0, 0, 0, 0, 0], a_run, 9, 2, 3, b_windows)
    # Held near its end: the window is judged as far as the request goes.
    assert held_request_problems([1, 2, 3, 4, 5, 25], a_run, 6, 4, 5, b_windows) == []


def test_a_switch_past_the_asked_points_is_not_judged() -> None:
    import pytest

    from fixtures.errors import HarnessError
    from fixtures.judging.weight_judges import held_request_problems

    a_run = [1, 2, 3, 4, 5, 6, 7, 8]
    b_windows = {s: [20 + s, 30 + s] for s in range(1, 4)}  # B asked from switch points 1..3
    with pytest.raises(HarnessError, match=r"switch may lie at token 4-5 .*\(up to 3\)"):
        held_request_problems([1, 2, 3, 4, 5, 0, 0, 0, 0], a_run, 9, 2, 5, b_windows)
    # One the asked points explain is judged all the same.
    assert held_request_problems([1, 2, 3, 23, 33, 0, 0, 0, 0], a_run, 9, 2, 5, b_windows) == []


def test_a_request_that_ended_before_the_pause_is_not_judged() -> None:
    import pytest

    from fixtures.errors import HarnessError
    from fixtures.judging.weight_judges import held_request_problems

    with pytest.raises(HarnessError, match="had all 6 tokens when the pause settled"):
        held_request_problems([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6], 6, 4, 6, {})


def test_the_switch_is_no_later_than_what_the_pause_held() -> None:
    from fixtures.judging.weight_judges import held_request_problems, held_switch_candidates

    before = [1, 2, 3, 4, 5, 6]
    tokens = [1, 2, 3, 4, 9, 9]  # B's first token equals A's 4th: the switch is at the hold, 3
    assert held_switch_candidates(tokens, before, 2, 3) == [3, 2]
    assert held_request_problems(tokens, before, 6, 2, 3, {3: [4, 9, 9], 2: [3, 4, 8, 8]}) == []
    # Tokens unlike A's before what the client had seen at the pause: no candidate at all.
    assert held_switch_candidates([1, 7, 3, 4, 9, 9], before, 3, 4) == []
    early = held_request_problems([1, 7, 3, 4, 9, 9], before, 6, 3, 4, {})
    assert early and "token 1 is unlike the old weights' uninterrupted run, before the pause" in early[0]


def test_a_hang_mid_session_is_a_failure_not_a_refusal() -> None:
    import httpx
    import openai

    from fixtures.judging.weight_judges import mid_session_problems
    from fixtures.observing.client import Generation

    hung = Generation(stream=False, error=openai.APITimeoutError(request=httpx.Request("POST", "http://x")))
    problems, got = mid_session_problems(hung, GOLDENS, "r")
    assert got == "no answer" and len(problems) == 1 and "the engine hung on it" in problems[0]
    stream_hung = Generation(stream=True, error=httpx.ReadTimeout("timed out"))
    assert mid_session_problems(stream_hung, GOLDENS, "r")[0]
    refused = Generation(stream=False, error=RuntimeError("HTTP 409: a session is open"))
    assert mid_session_problems(refused, GOLDENS, "r") == ([], "refused: HTTP 409: a session is open")
    assert mid_session_problems(Generation(stream=False, token_ids=[5, 6, 7, 8]), GOLDENS, "r") == (
        [], "answered with checkpoint B's output")
    mixed, _ = mid_session_problems(Generation(stream=False, token_ids=[5, 6, 3, 4]), GOLDENS, "r")
    assert mixed and "neither checkpoint's golden output" in mixed[0]


# -- weights/sync-leaves-state: a session call leaves what it does not own ---------------------

PAUSED = {"/is_sleeping": True, "/is_paused": True, "the sleep-state gauge": (1.0, 0.0, 0.0)}


def held_state(late: int = 1, **flags: object) -> StateSnapshot:
    """Paused with a request held at 40 tokens and `late` unanswered late arrivals."""
    return StateSnapshot({**PAUSED, **flags}, (Seen("in-flight", 40),),
                         tuple(Seen(f"late-{i}", 0) for i in range(late)))


def test_a_call_that_leaves_everything_as_it_was_has_no_problem() -> None:
    assert side_effect_problems("start_weight_update", held_state(1), held_state(2)) == []
    assert held_state_problems(held_state(1), "paused-keep") == []


def test_a_finish_that_resumes_is_named_by_flag_admission_and_requests() -> None:
    after = StateSnapshot({**PAUSED, "/is_paused": False}, (Seen("in-flight", 60),),
                          (Seen("late-0", 8, "finish_reason 'length'"), Seen("late-1", 3)))
    problems = side_effect_problems("finish_weight_update (version 'B')", held_state(1), after)
    assert problems == [
        "finish_weight_update (version 'B') changed /is_paused: True -> False",
        "finish_weight_update (version 'B') changed admission: a request sent before it was held, "
        "one sent after it running",
        "finish_weight_update (version 'B') let the held request in-flight run (40 -> 60 tokens)",
        "finish_weight_update (version 'B') ended the late arrival late-0 (finish_reason 'length', 8 tokens)"]


def test_a_chunk_that_ends_the_held_request_is_named() -> None:
    after = StateSnapshot(PAUSED, (Seen("in-flight", 40, "finish_reason 'abort'"),),
                          (Seen("late-0", 0), Seen("late-1", 0)))
    assert side_effect_problems("update_weights (3 tensors)", held_state(1), after) == [
        "update_weights (3 tensors) ended the held request in-flight (finish_reason 'abort', 40 tokens)"]


def test_a_checker_call_that_answers_a_late_arrival_is_named() -> None:
    after = StateSnapshot(PAUSED, (Seen("in-flight", 40),),
                          (Seen("late-0", 8, "finish_reason 'length'"), Seen("late-1", 0)))
    assert side_effect_problems("weight_checker checksum", held_state(1), after) == [
        "weight_checker checksum ended the late arrival late-0 (finish_reason 'length', 8 tokens)"]


def test_the_gauge_and_admission_are_judged_too() -> None:
    asleep = {"/is_sleeping": True, "/is_paused": True, "the sleep-state gauge": (0.0, 1.0, 0.0)}
    before = StateSnapshot(asleep, (), (Seen("late-0", 0, "error 503"),))
    woken = StateSnapshot({**asleep, "the sleep-state gauge": (1.0, 0.0, 0.0)}, (),
                          (Seen("late-0", 0, "error 503"), Seen("late-1", 0)))
    assert side_effect_problems("update_weight_version (v)", before, woken) == [
        "update_weight_version (v) changed the sleep-state gauge: (0.0, 1.0, 0.0) -> (1.0, 0.0, 0.0)",
        "update_weight_version (v) changed admission: a request sent before it was refused, "
        "one sent after it held"]


def test_a_refused_arrival_stays_refused_and_a_lost_request_is_named() -> None:
    before = StateSnapshot(PAUSED, (Seen("in-flight", 40),), (Seen("late-0", 0, "error 503"),))
    after = StateSnapshot(PAUSED, (), (Seen("late-0", 0, "error 503"), Seen("late-1", 0, "error 503")))
    assert side_effect_problems("init_weight_transfer_engine", before, after) == [
        "init_weight_transfer_engine: the held request in-flight was not observed after it"]


def test_fates_and_the_state_before_the_session() -> None:
    assert [fate(Seen("r", 0)), fate(Seen("r", 2)), fate(Seen("r", 0, "error 503")),
            fate(Seen("r", 8, "finish_reason 'length'"))] == ["held", "running", "refused", "answered"]
    ran = StateSnapshot(PAUSED, (Seen("in-flight", 600, "finish_reason 'abort'"),),
                        (Seen("late-0", 8, "finish_reason 'length'"),))
    assert held_state_problems(ran, "paused-keep") == [
        "paused-keep, before the session: the held request in-flight has ended (finish_reason 'abort', "
        "600 tokens)",
        "paused-keep, before the session: a request sent was answered (8 tokens, finish_reason "
        "'length'), neither held nor refused"]


class _Completions:
    """A stand-in control plane answering /v1/completions: each prompt's greedy run is its
    last id plus 1, 2, ... (a pure function of the prompt), its prompt ids a text's lengths."""

    def __init__(self, short: bool = False) -> None:
        self.bodies: list[dict] = []
        self.short = short

    def call(self, method: str, path: str, json: dict, timeout: float):
        from fixtures.observing.client import Reply

        self.bodies.append(json)
        choices = []
        for index, prompt in enumerate(json["prompt"]):
            ids = [len(prompt)] if isinstance(prompt, str) else list(prompt)
            run = [ids[-1] + i for i in range(1, json["max_tokens"] + 1 - self.short)]
            choices.append({"index": index, "token_ids": run, "prompt_token_ids": ids})
        return Reply(method, path, 200, {"choices": choices[::-1]}, 0.01)


def test_b_is_asked_to_continue_a_s_run_from_every_switch_point() -> None:
    from fixtures.judging import weight_references as refs

    control = _Completions()
    a = refs.capture(control, "m", refs.asks_of_a(), 5.0)  # type: ignore[arg-type]
    assert len(a[refs.HELD_A]) == refs.SWITCH_POINTS + refs.WINDOW
    assert a[refs.HELD_A + refs.PROMPT_SUFFIX] == [len(refs.HELD_PROMPT)]
    b = refs.capture(control, "m", refs.asks_of_b(a), 5.0)  # type: ignore[arg-type]
    # one batched request per kind and length: A's held run, A's prefixes, B's prefixes, B's windows
    assert [len(body["prompt"]) for body in control.bodies] == [1, 3, 3, refs.SWITCH_POINTS]
    assert control.bodies[-1]["prompt"][2] == [len(refs.HELD_PROMPT), *a[refs.HELD_A][:3]]
    found = refs.WeightReferences.of({"A": a, "B": b})
    assert found.held_a == tuple(a[refs.HELD_A])
    assert set(found.held_b) == set(range(1, refs.SWITCH_POINTS + 1))
    assert found.held_b[3] == tuple(a[refs.HELD_A][2] + i for i in range(1, refs.WINDOW + 1))
    assert set(found.prefix["B"]) == set(refs.PREFIX_PATHS)


def test_a_short_reference_is_a_harness_error() -> None:
    import pytest

    from fixtures.errors import HarnessError
    from fixtures.judging import weight_references as refs

    short = refs.SWITCH_POINTS + refs.WINDOW - 1
    with pytest.raises(HarnessError, match=f"reference held-A: {short} tokens"):
        refs.capture(_Completions(short=True), "m", refs.asks_of_a(), 5.0)  # type: ignore[arg-type]
