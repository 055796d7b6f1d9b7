"""``python -m clients.arena``: the arena's command line."""

from stacko.clients.arena.cli import main

raise SystemExit(main())
