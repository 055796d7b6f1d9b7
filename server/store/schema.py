"""The schema both backends share, its version, and the forward migrations.

One SQL text serves SQLite and PostgreSQL (``?`` placeholders; the PostgreSQL backend turns
them into ``$1``...). Times are integer milliseconds since the epoch (UTC): the same in both
databases, exact to compare, and what the wire already uses (``deadline_ms``).

``games``     one row per game: who, what options, and (once over) the result.
``games.record`` (schema 6) every change of a finished game, in order: the deal (its
              permutations), moves, clock expiries, resignations and other endings, as
              ONE value written by the statement that ends the game: zlib's compression
              of a JSON array with one array per event, ``[seq, kind, seat, ply, at_ms,
              payload]`` (``payload`` an object, ``seat`` null or 0/1; ``server.store.packed``).
``events``    the same, one row per change (``PRIMARY KEY (game_id, seq)``), of the games
              that ended before schema 6 (read when ``games.record`` is NULL; nothing new
              is written there): from schema 3 written whole in the transaction that ended
              the game, before that one row per change as it happened.
``event_log`` (schema 3) every change of a game in progress, in commit order, keyed by a
              growing id (one write at the log's end per commit, whatever the number of
              games); compacted now and then (``recorder.Recorder.compact``).
``sessions``  who may resume a seat of a game in progress: only a sha256 of the session
              token, never the token; rows go when the game ends.
``accounts``  registered names (schema 2): a normalized name (unique), human or bot, and
              only a sha256 of the API token; ``revoked_ms`` set when the token was revoked.
``ratings``   one row per account and game (schema 2): OpenSkill mu and sigma, W/D/L.
``rated_games`` one row per account and rated game (schema 2): the rating before and after,
              for profiles and the rating-history plot.
``rooms``     one row per open room (schema 3): game, options, seats (name, bot level,
              account kind and only a sha256 of the session token) and the id of its last
              game, so that a room waiting for a player or for a rematch is back after a
              restart with the same code; the row goes when the room closes.
``rated_pairs`` one row per rated game of the last 24 hours (schema 4): its two accounts
              (in sorted order), to limit rated games between the same pair on every node;
              and ``games.rated`` (schema 4): whether a rated room's game is rated.
``schema_version`` a single row: the version of the schema in the file.

Outside the versioned schema, SQLite only: ``journal_position``, a single row saying how
far the journal has been applied (``server.store.journal``: the SQLite backend's own
bookkeeping, created when the store opens, like SQLite's ``sqlite_sequence``; PostgreSQL
has no journal).

Ownership (``_OWNERSHIP``, schema 5): ``games.owner`` names the cluster node that serves a
game in progress and ``games.epoch`` counts its changes of owner (``rooms.owner``: the node
of a room without a game in progress). A node takes over a dead node's game with a
compare-and-set on both (``server.cluster.takeover``), and every append of an owner checks
them in its own transaction (fencing). Single nodes leave ``owner`` NULL.
"""

from __future__ import annotations

SCHEMA_VERSION = 6
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

_FINISHED = "WHERE status = 'finished'"

LOG_ID = "id INTEGER PRIMARY KEY"
"""The log's key: SQLite's rowid (a new row goes at the end of the table's one b-tree);
PostgreSQL's migrations write an identity column instead (``DIALECT``)."""

RECORD_COLUMN = "record BLOB"
"""``games.record`` (schema 6): bytes, ``BYTEA`` in PostgreSQL (``DIALECT``)."""

DIALECT: dict[str, dict[str, str]] = {
    "postgresql": {
        LOG_ID: "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
        RECORD_COLUMN: "record BYTEA",
    },
}
"""Per backend, the texts of the shared SQL it spells otherwise (applied to migrations)."""

_V3 = (
    # ``GET /api/games``: one index per filter over the finished games, each in the order of
    # the listing, so that every filter is a seek (``base.finished_query``).
    "DROP INDEX games_finished",
    "DROP INDEX games_code",
    f"CREATE INDEX games_by_code ON games (code, ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_ended ON games (ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_by_game ON games (game, ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_by_player0 ON games (player0, ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_by_player1 ON games (player1, ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_by_termination ON games (termination, ended_ms, id) {_FINISHED}",
    f"CREATE INDEX games_by_winner ON games (winner, ended_ms, id) {_FINISHED}",
    "CREATE INDEX games_playing ON games (started_ms) WHERE status = 'playing'",
    # Rooms that outlive a restart without a game in progress: waiting for a player, or
    # finished and waiting for a rematch (``recorder.Recorder.room``).
    """CREATE TABLE rooms (
        code TEXT PRIMARY KEY,
        game TEXT NOT NULL,
        options TEXT NOT NULL,
        public INTEGER NOT NULL,
        rated INTEGER NOT NULL,
        seats TEXT NOT NULL,
        game_id TEXT,
        updated_ms BIGINT NOT NULL
    )""",
    # The events of games in progress go to an append-only log (``recorder.LOG_SQL``);
    # ``events`` keeps the finished games', written whole when each ends.
    f"""CREATE TABLE event_log (
        {LOG_ID},
        game_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        seat INTEGER,
        ply INTEGER NOT NULL,
        payload TEXT NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
    "INSERT INTO event_log (game_id, seq, kind, seat, ply, payload, at_ms) "
    "SELECT game_id, seq, kind, seat, ply, payload, at_ms FROM events "
    "WHERE game_id IN (SELECT id FROM games WHERE status = 'playing') ORDER BY game_id, seq",
    "DELETE FROM events WHERE game_id IN (SELECT id FROM games WHERE status = 'playing')",
)

_V4 = (
    """CREATE TABLE rated_pairs (
        game_id TEXT PRIMARY KEY,
        game TEXT NOT NULL,
        a TEXT NOT NULL,
        b TEXT NOT NULL,
        at_ms BIGINT NOT NULL
    )""",
    "CREATE INDEX rated_pairs_recent ON rated_pairs (game, a, b, at_ms)",
    # A rated room's game: 1 (the room is rated, the game is not), 2 (the game is rated);
    # account0 and account1 are then its seats' accounts. After a restart, the same.
    "ALTER TABLE games ADD COLUMN rated INTEGER",
)

_OWNERSHIP = (
    "ALTER TABLE games ADD COLUMN owner TEXT",
    "ALTER TABLE games ADD COLUMN epoch INTEGER NOT NULL DEFAULT 0",
    # what a node looks for on every lease tick: the games in progress of other owners
    "CREATE INDEX games_owner ON games (status, owner)",
    # a room without a game in progress comes back on its own node only (``recorder.recover``)
    "ALTER TABLE rooms ADD COLUMN owner TEXT",
)

OWNERSHIP_VERSION = 5
"""The version that adds ``_OWNERSHIP`` (renumber here alone if another migration lands first)."""

_RECORD = (
    # A finished game's events as one value, written by the UPDATE that ends it: a row per
    # event into ``events`` (436 for a default game) weighed on the commit that carried them
    # (and the frames waiting behind it), and took 50,524 bytes on disk a game against
    # 5,110 (bench/README.md). The rows already in ``events`` stay there and are read as
    # before (``base.Store.events``).
    f"ALTER TABLE games ADD COLUMN {RECORD_COLUMN}",
)

RECORD_VERSION = 6
"""The version that adds ``_RECORD``."""

MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: _V1,
    2: _V2,
    3: _V3,
    4: _V4,
    OWNERSHIP_VERSION: _OWNERSHIP,
    RECORD_VERSION: _RECORD,
}
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
