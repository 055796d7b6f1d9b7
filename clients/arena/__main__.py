"""``python -m clients.arena``: the arena's command line."""

from clients.arena.cli import main

raise SystemExit(main())
