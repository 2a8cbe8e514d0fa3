"""The port lease of a sweep is one per port, whatever the address (issues 32 and 42): a second
sweep on ``localhost`` while one holds ``127.0.0.1`` at the same port, or on ``127.0.0.1``
while one holds ``0.0.0.0`` (every address), is refused before it starts anything, naming the
run that holds the port."""

from __future__ import annotations

import pytest
from ports import free_port

import specbench_lib as sb
from specbench_lib.servers.process import lease_address, port_lease


def test_localhost_and_its_address_are_one_lease_naming_the_holder() -> None:
    port = free_port()
    assert lease_address("localhost") == lease_address("127.0.0.1") == "127.0.0.1"
    with port_lease("127.0.0.1", port) as held:
        held.name("20261203T000000Z_tp1_abc123")
        with pytest.raises(sb.PreflightError) as err:
            with port_lease("localhost", port):
                pass
        message = str(err.value)
        assert "run 20261203T000000Z_tp1_abc123" in message and f"port {port}" in message
        assert "localhost (127.0.0.1)" in message and "\n" not in message
        with port_lease("127.0.0.1", free_port()):  # another port is another lease
            pass
    with port_lease("localhost", port):  # released with the first sweep
        pass


def test_a_host_that_does_not_resolve_is_keyed_by_its_text() -> None:
    assert lease_address("no-such-host.invalid") == "no-such-host.invalid"


@pytest.mark.parametrize(("held", "asked"), [("0.0.0.0", "127.0.0.1"), ("127.0.0.1", "0.0.0.0"),
                                             ("0.0.0.0", "localhost")])
def test_any_address_and_a_specific_one_are_one_lease(held: str, asked: str) -> None:
    """Before (issue 42), ``0.0.0.0`` and ``127.0.0.1`` on one port were two leases: both runs
    started, and one run's cells were all crashed (its server could not bind)."""
    port = free_port()
    with port_lease(held, port) as lease:
        lease.name("20261204T000000Z_tp1_def456")
        with pytest.raises(sb.PreflightError, match=f"port {port} on {asked}.*"
                           "run 20261204T000000Z_tp1_def456"):
            with port_lease(asked, port):
                pass
