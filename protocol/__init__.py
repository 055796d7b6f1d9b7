"""The wire: typed messages of both directions, error codes, and per-game codecs.

This package is the only boundary between JSON and the engine. ``PROTOCOL.md`` at the root
of the repository is its normative description; ``protocol/schema/`` holds the JSON Schema
generated from these models (``python -m protocol.schema`` rewrites it).
"""

from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.protocol.messages import (
    CLIENT,
    PROTOCOL_VERSION,
    SERVER,
    SUPPORTED_VERSIONS,
    ClientMessage,
    ServerMessage,
    parse_client,
)

__all__ = [
    "CLIENT",
    "PROTOCOL_VERSION",
    "SERVER",
    "SUPPORTED_VERSIONS",
    "ClientMessage",
    "ErrorCode",
    "ProtocolError",
    "ServerMessage",
    "parse_client",
]
