"""A user's own sync path (--lifecycle-weight-sync): how it is named, refused, merged into the
launch and called, on stand-ins (no server)."""

from __future__ import annotations

import json
import struct
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

from fixtures.errors import ConfigError, HarnessError
from fixtures.launching.config import build_config
from fixtures.observing.client import Reply
from fixtures.observing.weight_sync import Checkpoint, WeightClient
from vllm_lifecycle.weight_transfer.sync_path import (
    SyncRefused,
    SyncTarget,
    load_sync_path,
    merge_launch_args,
)

MODULE = "lifecycle_selftest_sync"


@pytest.fixture
def user_module() -> Iterator[types.ModuleType]:
    """A user's module, importable by name, with the shapes a sync path may take."""
    module = types.ModuleType(MODULE)
    seen: list[SyncTarget] = []

    def push(target: SyncTarget) -> None:
        seen.append(target)

    def refuse(target: SyncTarget) -> None:
        raise SyncRefused("the engine answered 500: layers on meta")

    def broken(target: SyncTarget) -> None:
        raise KeyError("update_info")

    class WithExtension:
        launch_args = ("--worker-extension-cls", "myrl.Ext")

        def sync(self, target: SyncTarget) -> None:
            seen.append(target)

    class Reserved:
        launch_args = ("--weight-transfer-config", '{"backend": "nccl"}')

        def sync(self, target: SyncTarget) -> None: ...

    class StringArgs:
        launch_args = "--enforce-eager"

        def sync(self, target: SyncTarget) -> None: ...

    module.__dict__.update(push=push, refuse=refuse, broken=broken, seen=seen, with_extension=WithExtension(),
                           reserved=Reserved(), string_args=StringArgs(), not_callable=42)
    sys.modules[MODULE] = module
    yield module
    del sys.modules[MODULE]


@pytest.mark.parametrize(("spec", "names"), [
    ("no-colon", "is not MODULE:NAME"),
    (":push", "is not MODULE:NAME"),
    ("no_such_module_here:push", "cannot import 'no_such_module_here'"),
    (f"{MODULE}:absent", "has no attribute 'absent'"),
    (f"{MODULE}:not_callable", "neither callable nor has a callable 'sync'"),
    (f"{MODULE}:reserved", "sets --weight-transfer-config"),
    (f"{MODULE}:string_args", "must be a sequence of strings"),
])
def test_a_bad_sync_path_is_refused_naming_what_is_wrong(user_module, spec, names) -> None:
    with pytest.raises(ValueError, match=names):
        load_sync_path(spec)
    with pytest.raises(ConfigError, match="--lifecycle-weight-sync: .*" + names.split("'")[0]):
        build_config({"--lifecycle-weight-sync": spec}.get, {}, Path("/tmp/r"), allowed_cores=[0])


def test_a_function_or_an_object_with_sync_and_launch_args(user_module) -> None:
    plain = load_sync_path(f"{MODULE}:push")
    assert plain.sync is user_module.push and plain.launch_args == ()
    obj = load_sync_path(f"{MODULE}:with_extension")
    assert obj.launch_args == ("--worker-extension-cls", "myrl.Ext")
    config = build_config({}.get, {"VLLM_LIFECYCLE_WEIGHT_SYNC": f"{MODULE}:push"}, Path("/tmp/r"),
                          allowed_cores=[0])
    assert config.weight_sync is not None and config.weight_sync.spec == f"{MODULE}:push"
    assert build_config({}.get, {}, Path("/tmp/r"), allowed_cores=[0]).weight_sync is None


def test_certification_and_an_external_target_refuse_a_sync_path(user_module) -> None:
    with pytest.raises(ConfigError, match="--lifecycle-certify: not allowed together with "
                                          "--lifecycle-weight-sync"):
        build_config({"--lifecycle-weight-sync": f"{MODULE}:push", "--lifecycle-certify": "1"}.get,
                     {}, Path("/tmp/r"), allowed_cores=[0])
    with pytest.raises(ConfigError, match="servers the suite launches"):
        build_config({"--lifecycle-weight-sync": f"{MODULE}:push",
                      "--lifecycle-target-url": "http://127.0.0.1:8000",
                      "--lifecycle-variants": "MRV1-eager", "--lifecycle-profile": "0.32"}.get,
                     {}, Path("/tmp/r"), allowed_cores=[0])


def test_launch_args_merge_a_flag_both_set_takes_the_sync_paths_value() -> None:
    base = ["--enable-prefix-caching", "--worker-extension-cls", "suite.Ext", "--max-model-len", "512"]
    assert merge_launch_args(base, ["--worker-extension-cls", "myrl.Ext", "--enforce-eager"]) == (
        "--enable-prefix-caching", "--max-model-len", "512", "--worker-extension-cls", "myrl.Ext",
        "--enforce-eager")
    assert merge_launch_args(base, ["--max-model-len=256"]) == (
        "--enable-prefix-caching", "--worker-extension-cls", "suite.Ext", "--max-model-len=256")
    assert merge_launch_args(base, []) == tuple(base)


def _checkpoint(tmp_path: Path) -> Checkpoint:
    header = json.dumps({"model.layers.0.w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(4))
    return Checkpoint("B", tmp_path)


class Control:
    base_url = "http://127.0.0.1:9"

    def __init__(self) -> None:
        self.sent: list[str] = []

    def call(self, method, route, json=None):
        self.sent.append(route)
        return Reply(method, route, 200, {}, 0.0)


def test_sync_goes_through_the_users_path_and_records_it(user_module, tmp_path) -> None:
    control = Control()
    client = WeightClient(control, {}, load_sync_path(f"{MODULE}:push"))  # type: ignore[arg-type]
    client.sync(_checkpoint(tmp_path), "v-B", engines=2)
    assert control.sent == []  # nothing of the suite's own session
    assert user_module.seen == [SyncTarget("http://127.0.0.1:9", tmp_path, tmp_path / "model.safetensors",
                                           "B", "v-B", 2)]
    assert [(c.route, c.status) for c in client.calls] == [(f"{MODULE}:push", 200)]
    assert not client.commits_versions


def test_a_refusal_fails_the_test_and_a_crash_of_the_path_is_a_harness_error(user_module, tmp_path) -> None:
    refusing = WeightClient(Control(), {}, load_sync_path(f"{MODULE}:refuse"))  # type: ignore[arg-type]
    with pytest.raises(AssertionError, match="through lifecycle_selftest_sync:refuse was refused: "
                                             "the engine answered 500"):
        refusing.sync(_checkpoint(tmp_path), "v")
    broken = WeightClient(Control(), {}, load_sync_path(f"{MODULE}:broken"))  # type: ignore[arg-type]
    with pytest.raises(HarnessError, match="raised KeyError: 'update_info' \\(raise SyncRefused"):
        broken.sync(_checkpoint(tmp_path), "v")
    assert [c.status for c in broken.calls] == [0]


def test_without_a_path_sync_is_the_suites_own_session(tmp_path) -> None:
    control = Control()
    client = WeightClient(control, {})  # type: ignore[arg-type]
    client.sync(_checkpoint(tmp_path), "v")
    assert control.sent == ["/init_weight_transfer_engine", "/start_weight_update", "/update_weights",
                            "/finish_weight_update"]
    assert client.commits_versions


def test_the_example_path_reloads_from_the_checkpoint_folder(monkeypatch, tmp_path) -> None:
    from vllm_lifecycle.weight_transfer import reload_sync

    posted = []

    class Answer:
        def __init__(self, status: int) -> None:
            self.status_code, self.text = status, "boom"

    def post(url, timeout, json):
        posted.append((url, json))
        return Answer(200 if len(posted) == 1 else 500)

    monkeypatch.setattr(reload_sync.requests, "post", post)
    target = SyncTarget("http://h:1", tmp_path, tmp_path / "model.safetensors", "B", None, 1)
    reload_sync.reload_from_disk(target)
    assert posted == [("http://h:1/collective_rpc", {"method": "reload_weights",
                                                     "kwargs": {"weights_path": str(tmp_path)}})]
    with pytest.raises(SyncRefused, match="answered 500: boom"):
        reload_sync.reload_from_disk(target)
