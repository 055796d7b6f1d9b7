"""Schema 3's event log: the changes of games in progress are appended to ``event_log``
(keyed by a growing id), a finished game's go whole into ``games.record`` when it ends
(schema 6; ``events`` before), the log is compacted to what the games in progress need,
and a database of schema 2 (or 5) is migrated with its games. On SQLite (both writers) and
PostgreSQL."""

from __future__ import annotations

import asyncio

import orjson
from stacko_wire import Game
from test_store_server import get_json

from stacko.server.store import journal, make_store, packed, recorder
from stacko.server.store.schema import MIGRATIONS, SCHEMA_VERSION
from stacko.server.store.sqlite import SQLiteStore

SMALL = {"tower": 3, "bricks": 8, "rounds": 2, "turn_cap": 6}


async def log_rows(store) -> list[tuple]:
    return await store.fetch("SELECT game_id, seq FROM event_log ORDER BY id")


async def test_moves_go_to_the_log_and_a_finished_game_to_its_record(make_harness, store_spec):
    h = await make_harness(store=make_store(*store_spec))
    g = await h.game(SMALL)
    for _ in range(3):
        await g.move()
    store = h.server.store
    await store.flush()
    (gid,) = [r[0] for r in await store.fetch("SELECT id FROM games")]
    assert await log_rows(store) == [(gid, seq) for seq in range(1, 5)]  # the deal, 3 moves
    assert await store.fetch("SELECT count(*) FROM events") == [(0,)]
    assert [r[0] for r in await store.events(gid)] == [1, 2, 3, 4]  # read from the log
    by_id = await store.in_progress_events([gid, "0" * 16])
    assert by_id == await store.in_progress_events() and [r[1] for r in by_id] == [1, 2, 3, 4]
    in_log = "SELECT seq, kind, seat, ply, payload, at_ms FROM event_log ORDER BY id"
    early = await store.fetch(in_log)
    await g.play_out()
    await store.flush()
    logged = await store.fetch(in_log)
    if store.cleans_log:  # the journal's applier deleted them with the result
        assert logged == []
        logged = early
    else:
        assert len(logged) == g.room.seq - 1  # the last event went with the record
    # one value, nothing in ``events``; read back, the very events the log had, and the end
    assert await store.fetch("SELECT count(*) FROM events") == [(0,)]
    ((blob,),) = await store.fetch("SELECT record FROM games WHERE id = ?", (gid,))
    assert packed.unpack(blob) == await store.events(gid)
    record = await store.events(gid)
    assert [r[0] for r in record] == list(range(1, g.room.seq + 1))
    assert [(*r[:4], orjson.dumps(r[4]).decode(), r[5]) for r in record[: len(logged)]] == logged
    assert record[-1][1] in ("move", "timeout", "end") and record[-1][3] == g.engine.ply


async def test_compaction_keeps_what_games_in_progress_need(make_harness, store_spec):
    h1 = await make_harness(store=make_store(*store_spec))
    store = h1.server.store
    rec = h1.server.hub._hooks.recorder
    done = await h1.game(SMALL, names=("a", "b"))
    await done.play_out()
    g = await h1.game(SMALL, names=("c", "d"))
    for _ in range(4):
        await g.move()
    # A game in progress this server does not record (another node's, or one it could not
    # restore): its rows stay.
    await store.execute(
        [
            (
                "INSERT INTO games (id, code, game, options, rules_version, public, players, "
                "player0, player1, status, started_ms) VALUES ('00000000000000aa', 'ABCDEFGH', "
                "'stacko', '{}', 1, 1, '[]', 'x', 'y', 'playing', 5)",
                (),
            ),
            (recorder.LOG_SQL, ("00000000000000aa", 1, "deal", None, 0, "{}", 5)),
        ]
    )
    await store.flush()
    gid = g.room.game_id
    before = await log_rows(store)
    ended = set() if store.cleans_log else {done.room.game_id}  # gone with its result
    assert {r[0] for r in before} == {gid, "00000000000000aa"} | ended
    deleted = await rec.compact()
    assert deleted == len(before) - 1  # all but the other's row, written again past them
    after = await log_rows(store)
    assert after == [("00000000000000aa", 1)] + [(gid, s) for s in range(1, 6)]
    # A compaction cut short leaves rows twice: recovery reads each once.
    await store.execute(
        [
            (
                "INSERT INTO event_log (game_id, seq, kind, seat, ply, payload, at_ms) "
                "SELECT game_id, seq, kind, seat, ply, payload, at_ms FROM event_log "
                "WHERE game_id = ?",
                (gid,),
            )
        ]
    )
    code, ply, tokens = g.code, g.engine.ply, [c.token for c in g.seats]
    await h1.server.shutdown(restart=True)
    h1.clients.clear()
    h2 = await make_harness(store=make_store(*store_spec))
    assert h2.server.restored == 2  # and the finished room; not the other's game
    h2.snap(code)
    assert h2.server.hub.rooms[code].game.ply == ply
    seats = []
    for seat, token in enumerate(tokens):
        c = await h2.client(("c", "d")[seat], hello=False)
        await c.hello(("c", "d")[seat], token)
        await c.expect("state", room=code)
        seats.append(c)
    await Game(h2, code, seats, []).play_out()
    await h2.server.store.flush()
    rows = await h2.server.store.events(gid)  # the record, after a compaction and a restart
    assert [r[0] for r in rows] == list(range(1, h2.server.hub.rooms[code].seq + 1))
    if store.cleans_log:  # its rows from before the restart went with its result too
        assert await log_rows(h2.server.store) == [("00000000000000aa", 1)]


async def test_the_log_is_compacted_by_itself(make_harness, store_spec, monkeypatch):
    monkeypatch.setattr(recorder, "COMPACT_MIN_ROWS", 5)
    monkeypatch.setattr(recorder, "COMPACT_CHUNK_IDS", 3)  # several delete transactions
    monkeypatch.setattr(recorder, "COMPACT_CHUNK_ROWS", 2)  # a game's rows in several
    h = await make_harness(store=make_store(*store_spec))
    rec = h.server.hub._hooks.recorder
    for names in (("a", "b"), ("c", "d"), ("e", "f")):
        await (await h.game(SMALL, names=names)).play_out()
    g = await h.game(SMALL, names=("g", "h"))
    await g.move()
    if h.server.store.cleans_log:
        # The finished games' rows went with their results: the log holds g's, nothing is due.
        await h.server.store.flush()
        assert rec.log_rows <= 5 and rec.compactions == 0
        assert {r[0] for r in await log_rows(h.server.store)} == {g.room.game_id}
        return
    for _ in range(100):
        if rec._compacting is not None and rec._compacting.done():
            break
        await h.server.store.flush()
        await asyncio.sleep(0.01)  # (a flush with nothing pending returns at once)
    assert rec.compactions >= 1  # it ran by itself
    while rec._compacting is not None and not rec._compacting.done():
        await rec._compacting  # one that ends may start the next (a trigger that came meanwhile)
    await h.server.store.flush()
    # Which rows the ones that ran left depends on when they began (a game's rows appended
    # after a compaction's start wait for the next): one more, after every game but g ended.
    await rec.compact()
    rows = await log_rows(h.server.store)
    assert {r[0] for r in rows} <= {g.room.game_id}
    assert sorted({r[1] for r in rows}) == list(range(1, g.room.seq + 1))  # all of it, once


async def as_rows_in_events(store, game_id: str) -> list[tuple]:
    """The statements that take a finished game's record back to schema 5's form (a row per
    event in ``events``, no ``games.record``): what a file of schema 3 to 5 holds."""
    ((blob,),) = await store.fetch("SELECT record FROM games WHERE id = ?", (game_id,))
    return [
        (recorder.EVENT_SQL, (game_id, *r[:4], orjson.dumps(r[4]).decode(), r[5]))
        for r in packed.unpack(blob)
    ] + [("ALTER TABLE games DROP COLUMN record", ())]


async def test_a_schema_5_database_is_migrated_with_its_finished_games(make_harness, store_spec):
    """A database as the schema-5 server left it: a finished game's events as rows of
    ``events``. After the migration to schema 6 they are read as before, replayed, and
    served; a game finished after it has its record in ``games.record`` alone."""
    h1 = await make_harness(store=make_store(*store_spec))
    done = await h1.game(SMALL, names=("a", "b"))
    await done.play_out()
    old_id, old_seq = done.room.game_id, done.room.seq
    await h1.server.store.flush()
    before = await h1.server.store.events(old_id)
    await h1.server.shutdown(restart=True)
    h1.clients.clear()
    store = make_store(*store_spec)
    await store.open()
    await store.execute(
        [
            *await as_rows_in_events(store, old_id),
            ("UPDATE schema_version SET version = 5", ()),
        ]
    )
    assert len(await store.fetch("SELECT * FROM events")) == old_seq
    await store.close()
    h2 = await make_harness(store=make_store(*store_spec))
    store = h2.server.store
    assert await store.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert await store.fetch("SELECT record FROM games WHERE id = ?", (old_id,)) == [(None,)]
    rows = await store.events(old_id)
    assert [(*r[:4], orjson.loads(r[4]), r[5]) for r in rows] == before  # payload as text
    status, record = await get_json(h2.server.port, f"/api/games/{old_id}")
    assert status == 200 and [e["seq"] for e in record["events"]] == list(range(1, old_seq + 1))
    new = await h2.game(SMALL, names=("c", "d"))
    await new.play_out()
    await store.flush()
    new_id = new.room.game_id
    assert await store.fetch("SELECT count(*) FROM events WHERE game_id = ?", (new_id,)) == [(0,)]
    assert [r[0] for r in await store.events(new_id)] == list(range(1, new.room.seq + 1))


async def test_a_schema_2_database_is_migrated_with_its_games(make_harness, store_spec):
    """A database as the schema-2 server left it: the events of a game in progress and of
    a finished one in ``events``. After the migration the game in progress is back at its
    ply (its events moved to the log) and the finished one is served."""
    h1 = await make_harness(store=make_store(*store_spec))
    done = await h1.game(SMALL, names=("a", "b"))
    await done.play_out()
    g = await h1.game(SMALL, names=("c", "d"))
    for _ in range(3):
        await g.move()
    code, ply, finished_id = g.code, g.engine.ply, done.room.game_id
    await h1.server.shutdown(restart=True)
    h1.clients.clear()
    store = make_store(*store_spec)
    await store.open()
    await store.execute(
        [
            *await as_rows_in_events(store, finished_id),
            (
                "INSERT INTO events (game_id, seq, kind, seat, ply, payload, at_ms) "
                "SELECT game_id, seq, kind, seat, ply, payload, at_ms FROM event_log "
                "WHERE game_id IN (SELECT id FROM games WHERE status = 'playing')",
                (),
            ),
            ("DROP TABLE event_log", ()),
            ("DROP TABLE rooms", ()),
            # and what schema 4 (accounts across nodes) added after it
            ("DROP TABLE rated_pairs", ()),
            ("ALTER TABLE games DROP COLUMN rated", ()),
            # and schema 5's (ownership)
            ("DROP INDEX games_owner", ()),
            ("ALTER TABLE games DROP COLUMN owner", ()),
            ("ALTER TABLE games DROP COLUMN epoch", ()),
            *[
                (f"DROP INDEX {sql.split()[2]}", ())
                for sql in MIGRATIONS[3]
                if sql.startswith("CREATE INDEX")
            ],
            *[(sql, ()) for sql in MIGRATIONS[1] if sql.startswith("CREATE INDEX")],
            ("UPDATE schema_version SET version = 2", ()),
        ]
    )
    assert len(await store.fetch("SELECT * FROM events")) > 4
    await store.close()
    h2 = await make_harness(store=make_store(*store_spec))
    store = h2.server.store
    assert await store.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]
    assert h2.server.restored == 1 and h2.server.hub.rooms[code].game.ply == ply
    playing = g.room.game_id
    assert await store.fetch("SELECT count(*) FROM events WHERE game_id = ?", (playing,)) == [(0,)]
    assert [r[1] for r in await log_rows(store)] == list(range(1, 5))
    assert len(await store.events(finished_id)) == done.room.seq
    (row,) = await store.fetch("SELECT status FROM games WHERE id = ?", (finished_id,))
    assert row == ("finished",)


def statement(sql: str) -> str:
    """What a statement does, to the table it does it to: ``UPDATE games``."""
    text = " ".join(line for line in sql.splitlines() if not line.startswith("--"))
    return text.split("(")[0].split(" SET ")[0].split(" WHERE ")[0].strip()


class Counting(SQLiteStore):
    """The SQLite store (the journal's writer); ``changes``: each change its journal got
    since ``clear``, as its statements, read back from the file (a move's is its line's
    ``event_op``): what was written, whichever way the store wrote it."""

    mark = 0

    @property
    def changes(self) -> list[list[str]]:
        assert self._jfile is not None
        path = self.data_dir / journal.file_name(self._jgen, self.key)
        with open(path, "rb") as f:
            f.seek(self.mark)
            data = f.read(self._jfile.offset - self.mark)
        records, _, trouble = journal.decode(data)
        assert not trouble
        return [[statement(sql) for sql, _ in ops] for _, ops, _ in records]

    def clear(self) -> None:
        assert self._jfile is not None
        self.mark = self._jfile.offset


async def test_a_move_writes_one_log_row_and_nothing_else(make_harness, tmp_path):
    """The hot path: a move is one row appended to the log; rooms, games and sessions are
    written when seats or the status change, never per move."""
    store = Counting(tmp_path / "data")
    h = await make_harness(store=store)
    g = await h.game(SMALL)
    await store.flush()
    assert any("INSERT INTO rooms" in c for c in store.changes)  # the seats and the start
    store.clear()
    for _ in range(3):
        await g.move()
    assert store.changes == [["INSERT INTO event_log"]] * 3


async def test_a_game_carries_its_rooms_row_at_its_start_and_end(make_harness, tmp_path):
    """The room's row changes with its status when a game starts and ends: it goes into the
    game's own change there (its deal, its result), not a change of its own; a rematch
    asked is a change of its own (a restart keeps who asked)."""
    store = Counting(tmp_path / "data")
    h = await make_harness(store=store)
    g = await h.game(SMALL)
    await store.flush()
    room_row = "SELECT game_id, seats FROM rooms WHERE code = ?"
    dealt = ["INSERT INTO games", *["INSERT INTO sessions"] * 2, "INSERT INTO rooms"]
    assert store.changes[-1] == [*dealt, "INSERT INTO event_log"]
    ((gid, seats),) = await store.fetch(room_row, (g.code,))
    assert gid == g.room.game_id and gid is not None
    assert [s["name"] for s in orjson.loads(seats)] == ["alice", "bob"]

    store.clear()
    await g.play_out()
    await store.flush()
    *moves, ended = store.changes
    assert moves == [["INSERT INTO event_log"]] * len(moves)
    # the row as the start wrote it: this game, nobody asking for a rematch (the status is
    # the game's, in ``games``)
    assert ended == ["UPDATE games", "DELETE FROM sessions"]
    assert await store.fetch("SELECT status FROM games WHERE id = ?", (gid,)) == [("finished",)]
    ((gid_after, seats),) = await store.fetch(room_row, (g.code,))
    assert gid_after == gid and [s["rematch"] for s in orjson.loads(seats)] == [False, False]

    store.clear()
    bob, alice = g.seats[1], g.seats[0]
    await bob.request("rematch", room=g.code)
    await bob.expect("room", room=g.code)
    await store.flush()
    assert store.changes == [["INSERT INTO rooms"]]
    ((_, seats),) = await store.fetch(room_row, (g.code,))
    assert [s["rematch"] for s in orjson.loads(seats)] == [False, True]

    store.clear()
    assert (await alice.call("rematch", room=g.code))["type"] == "joined"
    h.snap(g.code)  # the new game's first state, for the frame checks
    await store.flush()
    assert store.changes == [[*dealt, "INSERT INTO event_log"]]  # the next game's deal
    ((new_gid, seats),) = await store.fetch(room_row, (g.code,))
    assert new_gid == g.room.game_id and new_gid != gid
    assert [(s["name"], s["rematch"]) for s in orjson.loads(seats)] == [
        ("bob", False), ("alice", False),
    ]  # fmt: skip

    # A game whose room's row this server did not write (one restored after a restart):
    # its result writes the row.
    g.seats = [bob, alice]
    await g.settle(g.room.seq)
    g.room.record.room_row = None  # as ``restore`` leaves it
    store.clear()
    await g.play_out()
    await store.flush()
    assert store.changes[-1] == ["UPDATE games", "DELETE FROM sessions", "INSERT INTO rooms"]
    assert store.changes.count(["INSERT INTO rooms"]) == 0
    ((last_gid, _),) = await store.fetch(room_row, (g.code,))
    assert last_gid == new_gid


def test_the_recorder_hashes_a_token_once_and_keeps_a_bounded_number(monkeypatch):
    monkeypatch.setattr(recorder, "TOKEN_HASHES", 3)
    store = SQLiteStore.__new__(SQLiteStore)  # what the recorder reads of it, unopened
    rec = recorder.Recorder(store, clock=None)
    tokens = [f"token-{i}" for i in range(5)] + [recorder.DORMANT + "ab" * 32]
    sizes = []
    for token in tokens:
        want = "ab" * 32 if token.startswith(recorder.DORMANT) else recorder.token_hash(token)
        assert rec._hash(token) == want
        assert rec._hashes[token] == want
        # Made once: a second call reads what the first kept (the module may be compiled,
        # so its call of ``session_hash`` cannot be counted by patching it).
        rec._hashes[token] = "kept"
        assert rec._hash(token) == "kept"
        sizes.append(len(rec._hashes))
    assert sizes == [1, 2, 3, 1, 2, 3]  # emptied when full
