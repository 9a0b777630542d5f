"""The upstream snapshot (conformance/upstream_snapshot.yaml) is read from a release's source
archive by fixtures/spec/upstream_snapshot.py: sleep-mode server arguments and the floor root's
test functions, parsed as text. Checked here on hand-made archives."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from fixtures.spec import upstream_snapshot as us

CONFTEST = '''
BASE = ["--dtype", "bfloat16", "--gpu-memory-utilization", "0.75", "--enable-sleep-mode",
        "--enforce-eager"]
OTHER = ["--load-format", "dummy"]  # no sleep mode: not a lifecycle server
'''
TEST_FILE = '''
import pytest

def helper():
    pass

def test_one():
    args = ["--max-model-len=8192", "--enable-sleep-mode"]
    start(["--enable-sleep-mode", "--seed", "0"])

async def test_two():
    pass

class TestGroup:
    def test_three(self):
        pass

    def helper(self):
        pass

class Engine:
    def test_not_collected(self):
        pass
'''
FILES = {"tests/rl/conftest.py": CONFTEST, "tests/rl/sub/test_a.py": TEST_FILE,
         "tests/rl/sub/helpers.py": "def test_not_a_test_file(): pass\n",
         "tests/other/test_b.py": "def test_elsewhere(): pass\n"}


def test_the_snapshot_holds_sleep_mode_servers_and_the_roots_test_functions():
    snapshot = us.snapshot_of("0.32.0", FILES, "tests/rl")
    assert [(s.at, s.flags) for s in snapshot.servers] == [
        ("tests/rl/conftest.py::BASE", (("--dtype", "bfloat16"), ("--gpu-memory-utilization", "0.75"),
                                        ("--enable-sleep-mode", None), ("--enforce-eager", None))),
        ("tests/rl/sub/test_a.py::test_one::args",
         (("--max-model-len", "8192"), ("--enable-sleep-mode", None))),
        ("tests/rl/sub/test_a.py::test_one::line 9", (("--enable-sleep-mode", None), ("--seed", "0"))),
    ]
    assert snapshot.tests == ("sub/test_a.py::test_one", "sub/test_a.py::test_two",
                              "sub/test_a.py::TestGroup::test_three")
    assert snapshot.values_of("--gpu-memory-utilization") == {"0.75"}
    assert us.parse(us.dump(snapshot)) == snapshot


def _archive(tmp_path: Path, version: str, files: dict[str, str]) -> Path:
    path = tmp_path / f"vllm-{version}.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {"PKG-INFO": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
                           **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_regenerate_reads_a_source_archive_and_refuses_another_release(tmp_path, capsys):
    archive = _archive(tmp_path, "0.32.0", FILES)
    out = tmp_path / "snapshot.yaml"
    assert us.main(["regenerate", "--release", "0.32.0", "--source", str(archive), "--root", "tests/rl",
                    "--out", str(out)]) == 0
    assert us.load_snapshot(out) == us.snapshot_of("0.32.0", FILES, "tests/rl")
    assert out.read_text().startswith("# Facts read from vLLM's source archive")
    assert us.main(["regenerate", "--release", "0.31.0", "--source", str(archive), "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().endswith("is vLLM 0.32.0, not 0.31.0")


@pytest.mark.parametrize(("make", "wanted"), [
    (lambda p: _archive(p, "0.32.0", {}), "holds no tests/"),
    (lambda p: p / "missing", "neither a folder nor a tar archive"),
    (lambda p: p, "no PKG-INFO"),
])
def test_a_wrong_source_is_one_line(tmp_path, capsys, make, wanted):
    assert us.main(["regenerate", "--release", "0.32.0", "--source", str(make(tmp_path)),
                    "--out", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err
    assert wanted in err and err.count("\n") == 1


def test_a_malformed_snapshot_is_refused():
    with pytest.raises(us.SnapshotError, match="upstream snapshot: malformed"):
        us.parse("release: 0.32.0\nservers: 3\n")


def test_the_vendored_snapshot_is_of_the_floors_release_and_lists_upstreams_lifecycle_servers():
    snapshot = us.load_snapshot()
    assert snapshot.root == us.DEFAULT_ROOT
    assert all(us.SLEEP_FLAG in s.names for s in snapshot.servers)
    assert "--gpu-memory-utilization" in snapshot.flag_names
