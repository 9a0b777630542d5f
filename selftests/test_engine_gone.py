"""Engine.gone: a dead engine core is worded alike whether the API server still answers /health
503 or has already exited (a race CI met), so a finding's signature matches both."""

from __future__ import annotations

from dataclasses import dataclass

from fixtures.errors import ServerDiedError
from fixtures.observing.engine import Engine

DEATH_LOG = (
    "(EngineCore pid=7) ERROR 12-04 00:39:57 [core.py:1512] EngineCore encountered a fatal error.\n"
    "(EngineCore pid=7) ERROR 12-04 00:39:57 [core.py:1512] Traceback (most recent call last):\n"
    "(EngineCore pid=7) ERROR 12-04 00:39:57 [core.py:1512] RuntimeError: Worker failed with "
    "error 'Tensor on device cpu is not on the expected device meta!'\n")


@dataclass
class Server:
    exited: bool = False
    log: str = ""

    def ensure_alive(self) -> None:
        if self.exited:
            raise ServerDiedError("server exited (code 1)")

    def log_text(self) -> str:
        return self.log


@dataclass
class Control:
    status: int | None  # None: the connection is refused

    def health(self) -> int:
        if self.status is None:
            raise ServerDiedError("GET /health: cannot connect to a live server")
        return self.status


def engine(server: Server, control: Control) -> Engine:
    return Engine(server=server, variant=None, profile="0.32", platform="cpu",  # type: ignore[arg-type]
                  control=control, gen=None, request_timeout=1.0)  # type: ignore[arg-type]


def test_a_healthy_engine_is_not_gone():
    assert engine(Server(), Control(200)).gone() is None


def test_503_and_an_exited_server_are_worded_alike_with_the_engines_own_report():
    cause = ("the engine's log: EngineCore encountered a fatal error: RuntimeError: Worker failed "
             "with error 'Tensor on device cpu is not on the expected device meta!'")
    assert engine(Server(log=DEATH_LOG), Control(503)).gone() == f"/health 503; {cause}"
    assert engine(Server(exited=True, log=DEATH_LOG), Control(None)).gone() == (
        f"the server exited; {cause}")
    # /health still answered 200 but the process is gone by the second look
    assert engine(Server(exited=True, log=DEATH_LOG), Control(200)).gone() == (
        f"the server exited; {cause}")


def test_a_death_without_the_engines_report_says_so():
    assert engine(Server(exited=True), Control(None)).gone() == (
        "the server exited; the engine's log: no report of a fatal error")
