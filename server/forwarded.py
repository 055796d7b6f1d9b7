"""Who the client is behind a reverse proxy (``--forwarded-allow-ips``).

Behind nginx every socket comes from the proxy's address, so every per-address limit
(connections, new connections a second, ``hello`` s, waiting rooms, registrations, the HTTP
API's rate) would count the proxy: one client could spend everybody's budget. Only a peer
the operator trusts may say who the client is, in ``X-Forwarded-For``: its rightmost address
that is not itself a trusted proxy (each proxy appends the address it saw, so what is left of
that could be written by the client). A peer not in the list is the client, whatever it
sends. As uvicorn's option of the same name: a list of addresses and networks, ``*`` for any
peer (only when nothing but the proxy can reach the port; the header's hops are then all
taken as clients, so the rightmost is the one the proxy saw).
"""

from __future__ import annotations

import ipaddress

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class TrustedProxies:
    __slots__ = ("any", "networks")

    def __init__(self, spec: str = "") -> None:
        """``spec``: comma-separated addresses or networks (``10.0.0.0/8``), or ``*``;
        raises ``ValueError`` for anything else."""
        self.any = False
        self.networks: list[Network] = []
        for item in spec.split(","):
            item = item.strip()
            if not item:
                continue
            if item == "*":
                self.any = True
            else:
                self.networks.append(ipaddress.ip_network(item, strict=False))

    def __bool__(self) -> bool:
        return self.any or bool(self.networks)

    def trusts(self, ip: str) -> bool:
        """Whether a socket from ``ip`` may name the client (``*``: any)."""
        return self.any or self._listed(ip)

    def _listed(self, ip: str) -> bool:
        address = _address(ip)
        return address is not None and any(address in net for net in self.networks)

    def client(self, peer: str, forwarded_for: list[str]) -> str:
        """The client's address: ``peer`` unless it is trusted and the request names one
        (``forwarded_for``: every ``X-Forwarded-For`` header, in order). Hops are skipped
        only if listed (``*`` trusts every peer, not what a client wrote in the header);
        a hop that is no address (a proxy's mistake) leaves the peer as the client."""
        if not forwarded_for or not self.trusts(peer):
            return peer
        hops = [h.strip() for line in forwarded_for for h in line.split(",")]
        for hop in reversed(hops):
            if hop and not self._listed(hop):
                address = _address(hop)
                return str(address) if address is not None else peer
        return peer


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address
