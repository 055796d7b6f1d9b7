"""Attributes replaced for a measurement, and put back.

The timing benchmarks (``critical_path.py``, ``store_turns.py``) wrap what the server calls
through attributes (a class's method, a module's function, a frozen dataclass's field)
rather than edit its code, so the compiled modules stay as they are; ``undo`` restores every
one, last first, and their tests check that nothing is left changed.
"""

from __future__ import annotations

import types
from typing import Any


def _set(owner: Any, attr: str, value: Any) -> None:
    if isinstance(owner, type | types.ModuleType):
        setattr(owner, attr, value)
    else:  # a frozen dataclass (a GameCodec)
        object.__setattr__(owner, attr, value)


class Patches:
    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, Any]] = []

    def replace(self, owner: Any, attr: str, new: Any) -> None:
        self._undo.append((owner, attr, getattr(owner, attr)))
        _set(owner, attr, new)

    def undo(self) -> None:
        for owner, attr, old in reversed(self._undo):
            _set(owner, attr, old)
        self._undo.clear()
