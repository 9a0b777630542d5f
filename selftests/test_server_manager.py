"""The one-live-server rule, launch failures and process-group teardown, on a fake server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from fixtures.errors import ServerStartError
from fixtures.launching.server import KILL, LaunchConfig, group_members, stop_process_group
from selftests.conftest import fake_config


def test_equal_config_reuses_the_live_server(fake_manager):
    first = fake_manager.acquire(fake_config())
    again = fake_manager.acquire(fake_config())
    assert again is first and len(fake_manager.starts) == 1


def test_other_config_stops_the_old_server_before_starting(fake_manager):
    first = fake_manager.acquire(fake_config("a", FAKE_CHILD="1"))
    old_group = first.proc.pid
    assert len(group_members(old_group)) >= 2  # the server and its child
    second = fake_manager.acquire(fake_config("b"))
    assert second is not first
    assert group_members(old_group) == [], "old server's group must be empty"
    assert fake_manager.current is second and len(fake_manager.starts) == 2


def test_a_server_leads_its_own_group_in_the_callers_session(fake_manager):
    # A session of its own would give it its own scheduler autogroup, which left the client
    # runnable but unscheduled for seconds beside a busy dp2 server.
    server = fake_manager.acquire(fake_config())
    assert os.getpgid(server.proc.pid) == server.proc.pid
    assert os.getsid(server.proc.pid) == os.getsid(0)


def test_isolated_config_never_reuses(fake_manager):
    base = fake_config()
    first = fake_manager.acquire(base)
    isolated = fake_manager.acquire(base.isolated())
    assert isolated is not first and base.isolated() != base.isolated()


def test_early_exit_is_a_start_error_with_the_log_tail(fake_manager):
    with pytest.raises(ServerStartError, match=r"exited with code 3(.|\n)*refusing to start"):
        fake_manager.acquire(fake_config(FAKE_MODE="exit"))
    assert fake_manager.current is None


def test_failed_config_fails_fast_the_second_time(fake_manager):
    config = fake_config(FAKE_MODE="exit")
    with pytest.raises(ServerStartError):
        fake_manager.acquire(config)
    began = time.monotonic()
    with pytest.raises(ServerStartError, match="earlier start"):
        fake_manager.acquire(config)
    assert time.monotonic() - began < 1 and len(fake_manager.starts) == 1


def test_unhealthy_server_times_out_and_is_stopped(fake_manager):
    fake_manager.start_timeout = 2
    launched = []
    fake_manager.on_start = launched.append  # never reached: the server is never healthy
    with pytest.raises(ServerStartError, match="not healthy within"):
        fake_manager.acquire(fake_config(FAKE_MODE="hang", FAKE_CHILD="1"))
    assert fake_manager.current is None and launched == []
    assert not fake_manager.starts[-1].ok


def test_release_empties_the_group_even_when_a_child_ignores_sigterm(fake_manager):
    server = fake_manager.acquire(fake_config(FAKE_CHILD="1"))
    pgid = server.proc.pid
    fake_manager.release()
    assert group_members(pgid) == []
    assert fake_manager.current is None


def started_leader(setup: str = "pass") -> subprocess.Popen[bytes]:
    """A python leading its own group, returned once past interpreter start and ``setup``.

    A signal sent before then meets an interpreter still starting (exit 1, not the signal's
    death) or a handler not yet installed; the child says "ready" instead of a guessed sleep.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", f"import signal,sys,time; {setup}; print('ready', flush=True); "
         "sys.stdout.close(); time.sleep(600)"],
        start_new_session=True, stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    proc.stdout.close()
    return proc


def sigterm_ignoring_leader() -> subprocess.Popen[bytes]:
    """A process leading its own group that ignores SIGTERM (and has no children)."""
    return started_leader("signal.signal(signal.SIGTERM, signal.SIG_IGN)")


def test_stop_process_group_kills_what_ignores_sigterm():
    proc = sigterm_ignoring_leader()
    began = time.monotonic()
    stop_process_group(proc, grace=1.0)
    assert proc.poll() == -signal.SIGKILL
    assert group_members(proc.pid) == [] and time.monotonic() - began < 10


def test_launch_config_is_frozen_and_command_is_fresh():
    config = fake_config()
    with pytest.raises(AttributeError):
        config.args = ("--x",)  # type: ignore[misc]
    one = config.command(("serve",), 1)
    one.append("--mutated")
    assert "--mutated" not in config.command(("serve",), 1)
    assert config.command(("serve",), 1)[config.command(("serve",), 1).index("--host") + 1] == "127.0.0.1"


def test_environment_pins_runner_and_dev_mode():
    config = LaunchConfig(variant=fake_config().variant, model="m", served_model_name="m")
    env = config.environment({"VLLM_SERVER_DEV_MODE": "0", "PATH": os.environ.get("PATH", "")})
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    prod = LaunchConfig(variant=config.variant, model="m", served_model_name="m", dev_mode=False)
    assert "VLLM_SERVER_DEV_MODE" not in prod.environment({"VLLM_SERVER_DEV_MODE": "1"})


def test_a_leader_left_alone_is_killed_without_waiting_out_the_grace():
    """An API server whose children are gone but which still waits on its open streams."""
    proc = sigterm_ignoring_leader()
    began = time.monotonic()
    stop_process_group(proc, grace=30.0)
    assert proc.poll() == -signal.SIGKILL
    assert group_members(proc.pid) == [] and time.monotonic() - began < 10


def test_a_group_stops_at_the_first_signal_of_its_steps_that_ends_it():
    """The sweep's order: SIGINT first, so pytest finalises; the leader alone keeps the whole step."""
    proc = started_leader()
    stop_process_group(proc, steps=((signal.SIGINT, 30.0), KILL), leader_alone=False)
    assert proc.poll() == -signal.SIGINT and group_members(proc.pid) == []
    proc = sigterm_ignoring_leader()
    began = time.monotonic()
    stop_process_group(proc, steps=((signal.SIGTERM, 1.0), KILL), leader_alone=False)
    assert proc.poll() == -signal.SIGKILL and time.monotonic() - began >= 1.0


def test_a_reproducers_group_is_killed_at_once():
    proc = sigterm_ignoring_leader()
    began = time.monotonic()
    stop_process_group(proc, steps=(KILL,))
    assert proc.poll() == -signal.SIGKILL
    assert group_members(proc.pid) == [] and time.monotonic() - began < 10
