"""sleep(mode=wait) drains what is running, keeps what is queued, then releases memory: over
HTTP and through the Python API wherever the engine core runs in a process of its own (0.32
refuses the drain in-process: custody/inproc-drain-before-offload)."""

import pytest

from fixtures.judging.custody import drain_problems
from fixtures.protocol.capabilities import DEEP_DRAIN


@pytest.mark.behaviour("custody/drain-before-offload")
@pytest.mark.offline_engines("LLM-MP1", "AsyncLLM-MP1", "AsyncLLM-MP0")
@pytest.mark.parametrize("level", [1, 2], ids=lambda v: f"level{v}")
def test_drain_before_offload(lifecycle, level):
    if level > 1:
        lifecycle.require(DEEP_DRAIN)
    problems = drain_problems(lifecycle.drain.observe(level))
    assert not problems, "; ".join(problems)
