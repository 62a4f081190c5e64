"""Cohorts and networks from a request, without keeping the address or user agent (pure)."""

from __future__ import annotations

import pytest

from voting.cohorts import client_address, device_class, network_of


@pytest.mark.parametrize(
    "user_agent,device",
    [
        ("Mozilla/5.0 (iPhone; CPU iPhone OS 17_0 like Mac OS X) Mobile/15E148", "phone"),
        ("Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit Mobile Safari/537.36", "phone"),
        ("Mozilla/5.0 (iPad; CPU OS 17_0 like Mac OS X)", "tablet"),
        ("Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit Safari/537.36", "tablet"),
        ("Mozilla/5.0 (X11; Linux x86_64) Chrome/120.0 Safari/537.36", "desktop"),
        ("", "unknown"),
    ],
)
def test_device_class_is_coarse(user_agent, device):
    assert device_class(user_agent) == device


@pytest.mark.parametrize(
    "address,network",
    [
        ("203.0.113.77", "203.0.113.0/24"),
        ("::ffff:203.0.113.77", "203.0.113.0/24"),
        ("2001:db8:abcd:12::1", "2001:db8:abcd::/48"),
        ("not an address", None),
        ("", None),
    ],
)
def test_networks_are_slash_24_and_slash_48(address, network):
    assert network_of(address) == network


def test_forwarded_addresses_are_trusted_only_from_the_configured_proxies():
    chain = "198.51.100.9, 203.0.113.5"  # the client wrote the first entry, our proxy the last
    assert client_address("10.0.0.2", chain, 0) == "10.0.0.2"
    assert client_address("10.0.0.2", chain, 1) == "203.0.113.5"
    assert client_address("10.0.0.2", chain, 2) == "198.51.100.9"
    assert client_address("10.0.0.2", "", 1) == "10.0.0.2"
