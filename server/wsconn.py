"""A ``websockets`` server connection that hands complete messages to a callback at once.

``websockets`` queues each received message and wakes the task waiting in ``recv()``: a
future, a queue and a task switch per frame, and one more event-loop turn before the move is
even parsed. At light load that turn is most of the time between a move's arrival and the
parse (58 us median from ``data_received`` to the handler on this VM, cold caches).

``DirectServerConnection`` calls ``on_message`` from ``data_received`` for every complete,
unfragmented data frame instead. Everything unusual takes websockets' own path through
``recv()``, unchanged: fragmented messages, text that is not valid UTF-8 (``recv()`` closes
with 1007), and anything that arrives before ``on_message`` is set (a frame pipelined with
the upgrade request). Order is kept: from the moment a message takes that path until its
reader says it has handled it (``handled``), later messages take the path too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import CloseCode, Frame, Opcode
from websockets.protocol import Event

log = logging.getLogger("stacko.connection")

_DATA = (Opcode.TEXT, Opcode.BINARY, Opcode.CONT)


class DirectServerConnection(ServerConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_message: Callable[[str | bytes], None] | None = None
        self.queued = 0
        """Messages put on websockets' queue whose reader has not called ``handled`` yet
        (a fragmented message counts from its first fragment)."""

    def handled(self) -> None:
        """The reader has handled a message it took with ``recv()``."""
        self.queued -= 1
        assert self.queued >= 0, "handled() without a queued message"

    def process_event(self, event: Event) -> None:
        if self.request is None or not isinstance(event, Frame) or event.opcode not in _DATA:
            super().process_event(event)  # the handshake, control frames: websockets' own
            return
        deliver = self.on_message
        if deliver is None or self.queued or not event.fin or event.opcode is Opcode.CONT:
            self._queue(event)
            return
        data: str | bytes
        if event.opcode is Opcode.TEXT:
            try:
                data = str(event.data, "utf-8")
            except UnicodeDecodeError:
                self._queue(event)  # recv() raises it and closes with 1007
                return
        else:
            data = bytes(event.data)
        try:
            deliver(data)
        except Exception:  # never out of data_received: that would abort the transport
            log.exception("internal error while handling a frame")
            self.protocol.fail(CloseCode.INTERNAL_ERROR, "internal error")
            self.send_data()

    def _queue(self, event: Frame) -> None:
        # A message is counted at its first frame (a continuation belongs to one counted).
        if event.opcode is not Opcode.CONT:
            self.queued += 1
        super().process_event(event)
