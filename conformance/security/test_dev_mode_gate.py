"""The production contract: lifecycle endpoints exist only in dev mode."""

import dataclasses

import pytest

from fixtures.judging.assertions import serving
from fixtures.observing.engine import Engine

ENDPOINTS = [
    ("POST", "/sleep"), ("POST", "/wake_up"), ("GET", "/is_sleeping"), ("POST", "/pause"),
    ("POST", "/resume"), ("GET", "/is_paused"), ("POST", "/abort_requests"),
    ("POST", "/collective_rpc"),
]


@pytest.mark.behaviour("security/dev-endpoints-gated")
def test_dev_endpoints_gated(base_config, launch, run_state, target):
    config = dataclasses.replace(base_config, dev_mode=False, label="no-dev-mode")
    server = launch(config)
    engine = Engine.attach(server, config.variant, run_state.profile, target.platform,
                           run_state.config.request_timeout, run_state.shape)
    reachable = {}
    for method, path in ENDPOINTS:
        reply = engine.control.call(method, path, json={} if method == "POST" else None)
        if reply.status != 404:
            reachable[f"{method} {path}"] = reply.status
    assert not reachable, f"lifecycle endpoints answer without dev mode: {reachable}"
    serving(engine, "without dev mode")
