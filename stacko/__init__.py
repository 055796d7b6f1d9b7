"""Stacko: the game server, its protocol, the rules engine, the clients and the bots.

Everything installs under this one import name (``stacko.server``, ``stacko.engine``, ...), so
a user's own ``engine.py`` or another distribution's ``server`` package cannot collide with
it. In the repository the subpackages stay top-level folders (``server/``, ``engine/``, ...):
``stacko/<name>`` is a symbolic link to each, which the wheel turns into real folders.
"""
