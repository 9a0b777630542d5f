"""The servers the suite starts listen on loopback only: the lifecycle endpoints carry no
authentication, so nothing beyond this machine may reach them."""

from pathlib import Path

import pytest

from fixtures.launching.external import needs_own_process

LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp*
LOOPBACK4 = "0100007F"  # 127.0.0.1, little-endian hex


def listening_addresses(port: int) -> list[str]:
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        path = Path(table)
        if not path.exists():
            continue
        for line in path.read_text().splitlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, _, hex_port = local.partition(":")
            if state == LISTEN and int(hex_port, 16) == port:
                found.append(address)
    return found


@pytest.mark.behaviour("security/loopback-only")
def test_loopback_only(engine):
    needs_own_process(engine.server)
    if not Path("/proc/net/tcp").exists():
        pytest.skip("no /proc/net/tcp on this platform: listening addresses cannot be read")
    addresses = listening_addresses(engine.server.port)
    assert addresses, f"nothing listens on port {engine.server.port}"
    assert all(a == LOOPBACK4 for a in addresses), (
        f"port {engine.server.port} listens on {addresses}; only 127.0.0.1 ({LOOPBACK4}) is allowed")
