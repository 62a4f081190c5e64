"""Voter cohorts and networks, from what a request carries, without keeping it in clear.

Issue 6: "Voters are pseudonymous ... cohort flags (for example self-declared expertise, device
type), no IP address or user agent stored in clear." The user agent is reduced to a coarse
device class and thrown away; the address is reduced to its network (/24 for IPv4, /48 for
IPv6, the usual allocation to one site) and only a salted hash of that network is stored, so
"many voters from one network" can be counted without knowing who anyone is. Pure module.
"""

from __future__ import annotations

import ipaddress
import re

DEVICE_PHONE = "phone"
DEVICE_TABLET = "tablet"
DEVICE_DESKTOP = "desktop"
DEVICE_UNKNOWN = "unknown"
DEVICE_CLASSES = (DEVICE_PHONE, DEVICE_TABLET, DEVICE_DESKTOP, DEVICE_UNKNOWN)

# Self-declared expertise, asked once on the start page (optional).
EXPERTISE_CHOICES = (
    ("", "Prefer not to say"),
    ("viewer", "I watch films and series for fun"),
    ("enthusiast", "I am a keen film enthusiast"),
    ("professional", "I work in film, video or animation"),
)
EXPERTISE_VALUES = tuple(value for value, _ in EXPERTISE_CHOICES)

_TABLET = re.compile(r"iPad|Tablet|PlayBook|Silk|Kindle|(Android(?!.*Mobile))", re.IGNORECASE)
_PHONE = re.compile(r"Mobi|iPhone|iPod|Android.*Mobile|Windows Phone", re.IGNORECASE)


def device_class(user_agent: str) -> str:
    """A coarse device class from a user agent; the user agent itself is never stored."""
    if not user_agent:
        return DEVICE_UNKNOWN
    if _TABLET.search(user_agent):
        return DEVICE_TABLET
    if _PHONE.search(user_agent):
        return DEVICE_PHONE
    return DEVICE_DESKTOP


def network_of(address: str) -> str | None:
    """The network an address belongs to for abuse counting: /24 (IPv4) or /48 (IPv6).

    IPv4-mapped IPv6 addresses count as their IPv4 address. Returns ``None`` for something
    that is not an IP address.
    """
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    prefix = 24 if ip.version == 4 else 48
    return str(ipaddress.ip_network(f"{ip}/{prefix}", strict=False))


def client_address(remote_addr: str, forwarded_for: str, trusted_proxy_hops: int) -> str:
    """The client's address: ``REMOTE_ADDR``, or the address the trusted proxies saw.

    With ``trusted_proxy_hops`` proxies in front of the site, the client is the address that
    many entries from the right of ``X-Forwarded-For`` (entries further left were written by
    the client and cannot be trusted).
    """
    if trusted_proxy_hops <= 0 or not forwarded_for:
        return remote_addr
    hops = [part.strip() for part in forwarded_for.split(",") if part.strip()]
    if len(hops) < trusted_proxy_hops:
        return hops[0] if hops else remote_addr
    return hops[-trusted_proxy_hops]
