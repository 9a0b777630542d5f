"""A start on a platform with sleep mode must show the engine runs with it, by the engine's own
report: vLLM's line of non-default arguments, or the offline host's line of its engine's resolved
config. Off there is a harness error (the launch broke, not the engine); on CPU it is recorded."""

from __future__ import annotations

import types
from typing import Any

import pytest

from fixtures.errors import HarnessError
from fixtures.observing.server_log import sleep_mode_reported
from fixtures.plugin.start_checks import verify_sleep_mode

# As vllm serve logs it (the line of a CPU start of the suite, shortened).
SERVE_ON = ("(APIServer pid=12858) INFO 12-06 00:59:23 [api_utils.py:286] non-default args: "
            "{'enable_prompt_tokens_details': True, 'model': '/m', 'enforce_eager': True, "
            "'enable_sleep_mode': True, 'gpu_memory_utilization': 0.75}")
SERVE_OFF = ("(APIServer pid=12858) INFO 12-06 00:59:23 [api_utils.py:286] non-default args: "
             "{'enable_prompt_tokens_details': True, 'model': '/m', 'enforce_eager': True}")
# LLM logs the same line; the host's ready line carries the engine's resolved config.
HOST_ON = "offline host ready: LLM, multiprocessing=1, 120 tok/s, enable_sleep_mode=True"
HOST_OFF = "offline host ready: AsyncLLM, multiprocessing=0, 120 tok/s, enable_sleep_mode=False"


@pytest.mark.parametrize(("log", "reported"), [
    (SERVE_ON, True),
    (SERVE_OFF, False),
    (HOST_ON, True),
    (HOST_OFF, False),
    (SERVE_ON.replace("'enable_sleep_mode': True", "'enable_sleep_mode': False"), False),
    # The host's resolved config outweighs the arguments LLM logged before it.
    (SERVE_ON + "\n" + HOST_OFF, False),
    ("INFO starting\nINFO Route: /sleep", None),
])
def test_the_engines_report_is_read(log: str, reported: bool | None) -> None:
    assert sleep_mode_reported(log) is reported


def _server(log: str) -> Any:
    return types.SimpleNamespace(config=types.SimpleNamespace(name="MRV1-eager/shared"),
                                 log_text=lambda: log, facts={})


@pytest.mark.parametrize("log", [SERVE_ON, HOST_ON])
def test_sleep_mode_on_passes_where_the_platform_has_it(log: str) -> None:
    server = _server(log)
    verify_sleep_mode(server, sleep_mode_platform=True)
    assert server.facts["sleep_mode"] is True


@pytest.mark.parametrize(("log", "said"), [
    (SERVE_OFF, "reports enable_sleep_mode=False"),
    (HOST_OFF, "reports enable_sleep_mode=False"),
    ("INFO starting", "never reported its arguments"),
])
def test_sleep_mode_off_where_the_platform_has_it_is_a_harness_error(log: str, said: str) -> None:
    with pytest.raises(HarnessError, match=f"MRV1-eager/shared: the platform has sleep mode but the "
                                           f"engine {said}.*--enable-sleep-mode"):
        verify_sleep_mode(_server(log), sleep_mode_platform=True)


@pytest.mark.parametrize("log", [SERVE_OFF, HOST_OFF, "INFO starting"])
def test_on_a_platform_without_sleep_mode_the_report_is_only_recorded(log: str) -> None:
    server = _server(log)
    verify_sleep_mode(server, sleep_mode_platform=False)
    assert server.facts["sleep_mode"] is sleep_mode_reported(log)
