"""The asyncio shell around the engine: WebSocket connections, rooms, matchmaking, clocks.

Layers, outermost first: ``app`` (the port, HTTP paths, shutdown) -> ``connection`` (one
socket: limits, parsing, outbox) -> ``hub`` (sessions, rooms, queue, request dispatch) ->
``room`` (seats, one game, its clock; the only place that builds state frames, each from
the receiver's ``view``). Time comes from an injected ``clock``.
"""
