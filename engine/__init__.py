"""The rules of the games, pure and deterministic (sans-I/O).

Nothing here opens a socket, reads a clock or touches the global random generator: every
shuffle uses the source passed in (``engine.game.Shuffler``: a ``random.Random``, or anything
with its ``shuffle``). The server and the bots both import this
package; it imports neither of them, nor ``protocol``.

Quick tour (Stacko)::

    import random
    from stacko.engine.stacko import Stacko, DRAW, PASS, take, place
    game = Stacko(rng=random.Random(7))
    game.to_move                 # 0
    game.legal_moves()           # (take 0 .. take 9, draw)
    game.apply(DRAW)             # raises IllegalMoveError if the rules refuse
    game.view(0)                 # what seat 0 may know (game.view(None): a spectator)
    game.outcome()               # None until the game is over
"""

from stacko.engine.errors import EngineError, IllegalMoveError, IllegalReason, InvalidOptionsError
from stacko.engine.game import SPECTATOR, GameSpec, GameState
from stacko.engine.outcome import Outcome, Termination

__all__ = [
    "SPECTATOR",
    "EngineError",
    "GameSpec",
    "GameState",
    "IllegalMoveError",
    "IllegalReason",
    "InvalidOptionsError",
    "Outcome",
    "Termination",
]
