"""The user's grant of web access: which hosts WebFetch may read and WebSearch may search.

A grant is a list of entries, from the `web` setting (`web: {allow: [...]}`) and
`--allow-web`: a host name (`docs.python.org`, that host only), a wildcard
(`*.readthedocs.io`, its subdomains at any depth, not the domain itself), or an IP address
or network (`127.0.0.1`, `10.1.0.0/16`). Without an entry, the web tools are not offered.
Private, loopback, link-local and metadata addresses are refused, whatever host name leads
to them, unless an entry names the address itself.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sandbox_runner.catalog import WEB_TOOLS
from sandbox_runner.errors import ConfigError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")


class GrantError(ValueError):
    """An entry of a grant that is not a host name, a wildcard or an address."""


def parse_entry(entry: str) -> str:
    """The entry normalised (lower case, no trailing dot), or GrantError saying what is wrong.

    Raises:
        GrantError: a URL, a port, a path, a bare `*` or a malformed name.
    """
    text = entry.strip().lower().rstrip(".")
    if "://" in text or any(char in text for char in "?#@ \\"):
        raise GrantError(f"{entry!r} is not a host name: give the host alone (docs.python.org)")
    network = _network(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
    if network is not None:
        # One address reads as itself (127.0.0.1), not as the network 127.0.0.1/32.
        single = network.num_addresses == 1
        return str(network.network_address) if single else str(network)
    if "/" in text or ":" in text:
        raise GrantError(f"{entry!r} is not a host name: leave out the path and the port")
    name = text[2:] if text.startswith("*.") else text
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        raise GrantError(f"{entry!r} is not a valid host name") from None
    labels = name.split(".")
    if not name or not all(_LABEL.fullmatch(label) for label in labels):
        raise GrantError(
            f"{entry!r} is not a valid host name (a wildcard may only start it: *.example.com)"
        )
    if text.startswith("*.") and len(labels) < 2:
        raise GrantError(f"{entry!r} would grant a whole top-level domain; name a domain in it")
    return f"*.{name}" if text.startswith("*.") else name


def _network(text: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def parse_entries(entries: Iterable[str]) -> tuple[str, ...]:
    """Every entry normalised, each once, in order.

    Raises:
        GrantError: an entry is not valid.
    """
    return tuple(dict.fromkeys(parse_entry(entry) for entry in entries))


def entry_covers(wider: str, narrower: str) -> bool:
    """Whether every host (or address) NARROWER grants is granted by WIDER too."""
    if wider == narrower:
        return True
    wide_net, narrow_net = _network(wider), _network(narrower)
    if wide_net is not None or narrow_net is not None:
        return (
            wide_net is not None
            and narrow_net is not None
            and wide_net.version == narrow_net.version
            and narrow_net.subnet_of(wide_net)  # type: ignore[arg-type]
        )
    if not wider.startswith("*."):
        return False
    return narrower.removeprefix("*.").endswith(wider[1:])


@dataclass(frozen=True)
class WebGrant:
    """The hosts and addresses the web tools may reach (normalised entries, see parse_entry)."""

    entries: tuple[str, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[str]) -> WebGrant:
        """A grant of ENTRIES, checked and normalised (GrantError for a bad one)."""
        return cls(parse_entries(entries))

    def __bool__(self) -> bool:
        return bool(self.entries)

    def allows_host(self, host: str) -> bool:
        """Whether a URL's host (a name or an address literal) is in the grant."""
        host = host.strip("[]").lower().rstrip(".")
        address = _address(host)
        if address is not None:
            return self.names_address(address)
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return False
        for entry in self.entries:
            if entry == host or (entry.startswith("*.") and host.endswith(entry[1:])):
                return True
        return False

    def names_address(self, address: IPAddress) -> bool:
        """Whether an entry names this address (or a network holding it) itself."""
        mapped = getattr(address, "ipv4_mapped", None)
        candidates = [address, *([mapped] if mapped is not None else [])]
        for entry in self.entries:
            network = _network(entry)
            if network is not None and any(
                candidate.version == network.version and candidate in network
                for candidate in candidates
            ):
                return True
        return False

    def search_domains(self) -> list[str]:
        """The domains a web search may return results from: the grant's host names (a
        wildcard as its domain, which the search tool reads as the domain and its
        subdomains); addresses are left out."""
        domains = [entry.removeprefix("*.") for entry in self.entries if _network(entry) is None]
        return list(dict.fromkeys(domains))

    def covers(self, entry: str) -> bool:
        """Whether this grant already grants everything ENTRY would."""
        return any(entry_covers(mine, entry) for mine in self.entries)

    def describe(self) -> str:
        """The entries for a message: `docs.python.org, *.readthedocs.io` or `none`."""
        return ", ".join(self.entries) or "none"


def offered(names: Iterable[str], grant: WebGrant) -> list[str]:
    """NAMES without the web tools the grant does not cover: none without a grant, and no
    WebSearch when the grant names only addresses (a search returns host names)."""
    kept = []
    for name in names:
        if name in WEB_TOOLS and not grant:
            continue
        if name == "WebSearch" and not grant.search_domains():
            continue
        kept.append(name)
    return kept


def granted(configured: Sequence[str], flags: Sequence[str]) -> WebGrant:
    """The grant of a run: the `web` setting's entries (already checked) and those of
    `--allow-web`, which add to them (the user typed them).

    Raises:
        ConfigError: an `--allow-web` entry is not a host name or an address.
    """
    try:
        extra = parse_entries(flags)
    except GrantError as error:
        raise ConfigError(f"--allow-web {error}") from None
    return WebGrant(tuple(dict.fromkeys([*configured, *extra])))


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for, if it stands for one."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address.teredo[1] if address.teredo is not None else None


def _address(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def refused_address(address: IPAddress) -> str:
    """Why the web tools never connect to ADDRESS unless a grant names it ("" when they may):
    loopback, private, link-local (cloud metadata lives there), multicast and the like."""
    embedded = _embedded_ipv4(address)
    if embedded is not None:
        # An IPv6 form of an IPv4 address (mapped, NAT64, 6to4, Teredo) reaches it.
        return refused_address(embedded)
    for kind, flag in (
        ("a loopback", address.is_loopback),
        ("a link-local (cloud metadata)", address.is_link_local),
        ("a private", address.is_private),
        ("a multicast", address.is_multicast),
        ("an unspecified", address.is_unspecified),
        ("a reserved", address.is_reserved),
    ):
        if flag:
            return f"{kind} address"
    return "" if address.is_global else "a non-public address"
