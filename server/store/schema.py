"""The schema both backends share, its version, and the forward migrations.

One SQL text serves SQLite and PostgreSQL (``?`` placeholders; the PostgreSQL backend turns
them into ``$1``...). Times are integer milliseconds since the epoch (UTC): the same in both
databases, exact to compare, and what the wire already uses (``deadline_ms``).

``games``     one row per game: who, what options, and (once over) the result.
``events``    every change of a game, in order: the deal (its permutations), moves, clock
              expiries, resignations and other endings (``PRIMARY KEY (game_id, seq)``).
``sessions``  who may resume a seat of a game in progress: only a sha256 of the session
              token, never the token; rows go when the game ends.
``accounts``  registered names (schema 2): a normalized name (unique), human or bot, and
              only a sha256 of the API token; ``revoked_ms`` set when the token was revoked.
``ratings``   one row per account and game (schema 2): OpenSkill mu and sigma, W/D/L.
``rated_games`` one row per account and rated game (schema 2): the rating before and after,
              for profiles and the rating-history plot.
``schema_version`` a single row: the version of the schema in the file.

Ownership (``_OWNERSHIP``): ``games.owner`` names the cluster node that serves a game in
progress and ``games.epoch`` counts its changes of owner. A node takes over a dead node's
game with a compare-and-set on both (``server.cluster.takeover``), and every append of an
owner checks them in its own transaction (fencing). Single nodes leave ``owner`` NULL.
"""

from __future__ import annotations

SCHEMA_VERSION = 3
"""Bump it with a new entry in ``MIGRATIONS`` (the SQL that takes version N-1 to N)."""

_V1 = (
    """CREATE TABLE games (
        id TEXT PRIMARY KEY,
        code TEXT NOT NULL,
        game TEXT NOT NULL,
        variant TEXT,
        options TEXT NOT NULL,
        rules_version INTEGER NOT NULL,
        public INTEGER NOT NULL,
        players TEXT NOT NULL,
        player0 TEXT NOT NULL,
        player1 TEXT NOT NULL,
        status TEXT NOT NULL,
        result TEXT,
        winner INTEGER,
        termination TEXT,
        started_ms BIGINT NOT NULL,
        ended_ms BIGINT,
        plies INTEGER NOT NULL DEFAULT 0,
        last_seq INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX games_finished ON games (status, ended_ms, id)",
    "CREATE INDEX games_code ON games (code)",
    """CREATE TABLE events (
        game_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        seat INTEGER,
        ply INTEGER NOT NULL,
        payload TEXT NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (game_id, seq)
    )""",
    """CREATE TABLE sessions (
        game_id TEXT NOT NULL,
        seat INTEGER NOT NULL,
        token_hash TEXT NOT NULL,
        PRIMARY KEY (game_id, seat)
    )""",
)

_V2 = (
    """CREATE TABLE accounts (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        normalized TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        token_hash TEXT NOT NULL UNIQUE,
        created_ms BIGINT NOT NULL,
        rotated_ms BIGINT,
        revoked_ms BIGINT,
        builtin INTEGER NOT NULL DEFAULT 0
    )""",
    """CREATE TABLE ratings (
        account_id TEXT NOT NULL,
        game TEXT NOT NULL,
        mu DOUBLE PRECISION NOT NULL,
        sigma DOUBLE PRECISION NOT NULL,
        games INTEGER NOT NULL DEFAULT 0,
        wins INTEGER NOT NULL DEFAULT 0,
        draws INTEGER NOT NULL DEFAULT 0,
        losses INTEGER NOT NULL DEFAULT 0,
        updated_ms BIGINT NOT NULL,
        PRIMARY KEY (account_id, game)
    )""",
    "CREATE INDEX ratings_board ON ratings (game, mu)",
    """CREATE TABLE rated_games (
        account_id TEXT NOT NULL,
        game_id TEXT NOT NULL,
        game TEXT NOT NULL,
        opponent TEXT NOT NULL,
        score DOUBLE PRECISION NOT NULL,
        mu_before DOUBLE PRECISION NOT NULL,
        sigma_before DOUBLE PRECISION NOT NULL,
        mu_after DOUBLE PRECISION NOT NULL,
        sigma_after DOUBLE PRECISION NOT NULL,
        at_ms BIGINT NOT NULL,
        PRIMARY KEY (account_id, game_id)
    )""",
    "CREATE INDEX rated_games_recent ON rated_games (account_id, game, at_ms)",
    # A rated game in progress: its two accounts, so that it is still rated after a restart.
    "ALTER TABLE games ADD COLUMN account0 TEXT",
    "ALTER TABLE games ADD COLUMN account1 TEXT",
)

_OWNERSHIP = (
    "ALTER TABLE games ADD COLUMN owner TEXT",
    "ALTER TABLE games ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
    # what a node looks for on every lease tick: the games in progress of other owners
    "CREATE INDEX games_owner ON games (status, owner)",
)

OWNERSHIP_VERSION = 3
"""The version that adds ``_OWNERSHIP`` (renumber here alone if another migration lands first)."""

MIGRATIONS: dict[int, tuple[str, ...]] = {1: _V1, 2: _V2, OWNERSHIP_VERSION: _OWNERSHIP}
"""version -> the statements that take the schema from version - 1 to it (0: empty)."""

VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"


class SchemaError(Exception):
    """The database holds a schema this server cannot use (newer than it knows)."""


def plan(found: int | None) -> list[int]:
    """The migrations to run on a database at version ``found`` (``None``: no schema yet)."""
    current = 0 if found is None else found
    if current > SCHEMA_VERSION:
        raise SchemaError(
            f"the database has schema version {current}, newer than this server's "
            f"{SCHEMA_VERSION}: upgrade the server (or point it at another database)"
        )
    return list(range(current + 1, SCHEMA_VERSION + 1))
