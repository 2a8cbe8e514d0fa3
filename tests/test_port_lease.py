"""The port lease of a sweep is keyed by the address its host resolves to (issue 32): a second
sweep on ``localhost`` while one holds ``127.0.0.1`` at the same port is refused before it
starts anything, naming the run that holds the port."""

from __future__ import annotations

import pytest
from budgetparams import free_port

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
