"""Bots: pure ``choose(view, legal) -> move`` players that see only what a seat sees."""
