"""The store on its own: schema version and migrations, retention, group commit, and the
faults that must stop a server with a clear message (a corrupt or unusable file, a schema
from a newer server). The same tests run on SQLite and PostgreSQL where they apply."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from stacko.server.batch import OutputGate
from stacko.server.store import StoreError, make_store
from stacko.server.store.base import Filters
from stacko.server.store.schema import SCHEMA_VERSION, plan
from stacko.server.store.sqlite import FILE_NAME


def game_row(gid: str, ended_ms: int | None, status: str = "finished"):
    return (
        "INSERT INTO games (id, code, game, variant, options, rules_version, public, players, "
        "player0, player1, status, result, winner, termination, started_ms, ended_ms, plies) "
        "VALUES (?, 'ABCDEF', 'stacko', NULL, '{}', 1, 1, '[]', 'a', 'b', ?, '{}', 0, "
        "'completed', 0, ?, 3)",
        (gid, status, ended_ms),
    )


async def test_a_new_database_gets_the_current_schema_version(open_store):
    store = await open_store()
    assert await store.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


async def test_reopening_keeps_the_data_and_migrates_nothing(open_store):
    store = await open_store()
    store.submit([game_row("a" * 16, 5)])
    await store.flush()
    await store.close()
    again = await open_store()
    assert await again.fetch("SELECT id FROM games") == [("a" * 16,)]
    assert await again.fetch("SELECT version FROM schema_version") == [(SCHEMA_VERSION,)]


async def test_a_schema_from_a_newer_server_is_refused(open_store, store_spec):
    store = await open_store()
    await store.execute([("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))])
    await store.close()
    with pytest.raises(StoreError, match="newer than this server"):
        await make_store(*store_spec).open()


def test_migration_plan():
    assert plan(None) == list(range(1, SCHEMA_VERSION + 1))
    assert plan(SCHEMA_VERSION) == []


def batched(store_spec):
    """``store_spec`` with the SQLite writer that commits in batches (``loop``): the
    journal writer commits each change alone (its applier's transactions are the batches)."""
    if store_spec[0] != "sqlite" or len(store_spec) > 2:  # PostgreSQL, the writer thread
        return store_spec
    return ("sqlite", store_spec[1], "normal", "loop")


async def test_group_commit_takes_everything_queued(open_store, store_spec):
    store = await open_store(batched(store_spec))
    for i in range(200):
        store.submit([game_row(f"{i:016x}", i)])
    await store.flush()
    assert store.committed == store.appended == 200
    assert store.stats.changes == 200 and store.stats.commits < 200  # batched
    assert (await store.fetch("SELECT count(*) FROM games"))[0][0] == 200


async def test_gate_releases_held_frames_in_order_after_the_commit(open_store, store_spec):
    store = await open_store(batched(store_spec))
    out: list[str] = []
    store.hold(out.append, "before")  # nothing pending: released by the next commit
    store.submit([game_row("b" * 16, 1)])
    assert store.holding
    store.hold(out.append, "after")
    assert out == []
    await store.flush()
    assert out == ["before", "after"] and not store.holding


async def test_paging_and_retention(open_store):
    store = await open_store()
    store.PURGE_CHUNK = 2  # several rounds
    store.submit([game_row(f"{i:016x}", 1000 + i) for i in range(5)])
    store.submit([game_row("f" * 16, None, status="playing")])
    await store.flush()
    rows = await store.list_finished(Filters(limit=2))
    assert [r[0] for r in rows] == [f"{i:016x}" for i in (4, 3, 2)]  # one extra: a next page
    assert await store.purge(1003) == 3
    assert [r[0] for r in await store.fetch("SELECT id FROM games ORDER BY id")] == [
        f"{3:016x}", f"{4:016x}", "f" * 16,
    ]  # fmt: skip


async def test_a_failed_commit_stops_everything(open_store, store_spec):
    """(The journal's commit is its write: a statement SQLite refuses stops its applier,
    ``test_store_journal.py``.)"""
    store = await open_store(batched(store_spec))
    failures = []
    store.on_failure = failures.append
    store.submit([("INSERT INTO no_such_table VALUES (?)", (1,))])
    store.hold(lambda _: pytest.fail("a held frame left after a failed commit"), None)
    for _ in range(200):
        if failures:
            break
        await asyncio.sleep(0.01)
    assert failures and store.failed is not None and store.holding
    assert store.stats.errors == 1
    with pytest.raises(StoreError):
        await store.flush()


async def test_a_corrupt_sqlite_file_is_refused_with_a_message(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / FILE_NAME).write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot use the data file"):
        await make_store("sqlite", str(data)).open()


async def test_an_unusable_data_dir_is_refused_with_a_message(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="cannot use the data file"):
        await make_store("sqlite", str(blocker / "data")).open()


async def test_sqlite_pragmas(tmp_path):
    store = make_store("sqlite", str(tmp_path), "full")
    await store.open()
    try:
        conn = sqlite3.connect(tmp_path / FILE_NAME)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        conn.close()
    finally:
        await store.close()


async def test_postgresql_that_does_not_answer_is_refused_with_a_message():
    from pgcluster import free_port

    port = free_port()
    with pytest.raises(StoreError, match="cannot use PostgreSQL"):
        await make_store(f"postgresql://nobody:secret@127.0.0.1:{port}/x").open()


@pytest.mark.parametrize(
    "dsn", ["postgresql://bob:pw@[::1", "postgresql://bob:pw@host:notaport/db"]
)
async def test_a_malformed_postgresql_url_is_refused_with_a_message(dsn):
    """asyncpg raises ValueError for these: it was a traceback and exit status 1."""
    with pytest.raises(StoreError, match="cannot use PostgreSQL at postgresql://bob:\\*\\*\\*@"):
        await make_store(dsn).open()


def test_a_password_in_the_postgresql_query_string_is_not_logged():
    """``?password=`` is libpq's other way to pass it (asyncpg takes it too): the URL went
    to the log in clear at every start and in every error."""
    from pgcluster import free_port

    port = free_port()
    store = make_store(f"postgresql://bob@127.0.0.1:{port}/x?sslmode=disable&password=s3cret")
    assert "s3cret" not in store.location and "sslmode=disable" in store.location
    store = make_store(f"postgresql://bob@127.0.0.1:{port}/x?PassWord=s3cret&x=1")
    assert "s3cret" not in store.location


def test_make_store_refuses_unknown_databases():
    with pytest.raises(ValueError):
        make_store("mysql://x")
    assert make_store("memory") is None


async def test_postgresql_going_away_stops_the_store(pg_cluster):
    """The writer's connection is cut (as when PostgreSQL restarts or the network drops):
    the next commit fails, and the store fails stop rather than lose changes."""
    store = make_store(pg_cluster.fresh_db())
    await store.open()
    try:
        failures = []
        store.on_failure = failures.append
        await store.fetch(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE pid <> pg_backend_pid() AND datname = current_database()"
        )
        store.submit([game_row("c" * 16, 1)])
        for _ in range(500):
            if failures:
                break
            await asyncio.sleep(0.01)
        assert failures and store.failed is not None and store.holding
    finally:
        await store.close()


async def test_retention_deletes_old_finished_games_at_start(open_store):
    import time
    import types

    from stacko.server.__main__ import _retention

    store = await open_store()
    now_ms = int(time.time() * 1000)
    store.submit([game_row("0" * 16, now_ms - 10 * 86_400_000), game_row("1" * 16, now_ms)])
    store.submit([game_row("2" * 16, None, status="playing")])  # never deleted: in progress
    await store.flush()
    task = asyncio.create_task(_retention(types.SimpleNamespace(store=store), 7))
    for _ in range(300):
        if len(await store.fetch("SELECT id FROM games")) == 2:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    ids = sorted(r[0] for r in await store.fetch("SELECT id FROM games"))
    assert ids == ["1" * 16, "2" * 16]


def test_the_gate_releases_up_to_a_ticket_in_order_with_what_is_held_meanwhile():
    gate = OutputGate()
    out: list[str] = []

    def then_hold(name: str) -> None:  # a release that holds again (a close, say)
        out.append(name)
        gate.hold(out.append, name + "2")

    gate.ticket = 1
    gate.hold(out.append, "a")
    gate.hold(out.append, "b")
    gate.ticket = 2
    gate.hold(out.append, "c")
    gate.ticket = 3
    gate.hold(then_hold, "d")
    gate.release(0)
    assert out == []
    gate.release(2)
    assert out == ["a", "b", "c"]
    gate.release(3)  # what ``then_hold`` held waits for ticket 3, just committed: same pass
    assert out == ["a", "b", "c", "d", "d2"] and gate.held_frames == 5
    gate.ticket = 4
    gate.hold(out.append, "e")
    gate.drop()  # a failed store: nothing held leaves, nothing more will
    gate.release(4)
    assert out == ["a", "b", "c", "d", "d2"] and gate.holding


@pytest.mark.parametrize("writer", ["journal", "loop", "thread"])
async def test_closing_waits_for_a_read_whose_caller_is_gone(tmp_path, writer):
    """A ``fetch`` runs in a thread (and reads on there when its caller is cancelled);
    ``close`` closed the connection under it, which crashed the process now and then (a
    segmentation fault in a reading thread as a test's loop shut down). Now the close waits
    for the read, and a read after the close is a ``StoreError``."""
    import threading

    store = make_store("sqlite", str(tmp_path / "data"), "normal", writer)
    await store.open()
    entered, release = threading.Event(), threading.Event()

    def hold() -> int:
        entered.set()
        release.wait(5)
        return 7

    store._reader.create_function("hold", 0, hold)
    reading = asyncio.create_task(
        store.fetch(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) "
            "SELECT CASE WHEN i = 1 THEN hold() ELSE i END FROM n"
        )
    )
    assert await asyncio.to_thread(entered.wait, 10)
    closing = asyncio.create_task(store.close())
    await asyncio.wait({closing}, timeout=0.5)  # a close that does not wait is done by now
    release.set()
    await asyncio.wait_for(closing, 10)
    assert await reading == [(7,)] + [(i,) for i in range(2, 1001)]  # to its end
    with pytest.raises(StoreError):
        await store.fetch("SELECT 1")


async def test_closing_postgresql_waits_for_a_read_in_flight(pg_cluster):
    """The PostgreSQL store's close waits for its reader's query in flight (closing the
    connection under it failed the read, and asyncpg's close with "got result for unknown
    protocol state"); a read after the close is a ``StoreError``."""
    store = make_store(pg_cluster.fresh_db())
    await store.open()
    reading = asyncio.create_task(store.fetch("SELECT 7 FROM pg_sleep(0.3)"))
    for _ in range(100):  # bounded: until the read holds the reader
        if store._read_lock.locked():
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(store.close(), 10)
    assert await reading == [(7,)]
    with pytest.raises(StoreError):
        await store.fetch("SELECT 1")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:s3cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("rediss://bob:s3cret@cache.example:6380/1", "rediss://bob:***@cache.example:6380/1"),
        ("redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"),
        ("postgresql://bob:s3cret@h/x", "postgresql://bob:***@h/x"),
        ("postgresql://bob@h/x?password=s3cret&a=1", "postgresql://bob@h/x?password=***&a=1"),
    ],
)
def test_urls_are_logged_without_their_passwords(url, shown):
    """``--redis-url`` went to the log in clear ("joined the cluster at ..."): Redis puts
    its password in the URL with an empty user, ``redis://:PASSWORD@host``."""
    from stacko.server.config import redacted_url

    assert redacted_url(url) == shown


@pytest.mark.parametrize(
    "argv", [["--redis-url", "http://:s3cret@h:6379"], ["--database", "mysql://bob:s3cret@h/x"]]
)
def test_a_refused_url_is_not_echoed_with_its_password(argv, capsys):
    from stacko.server.config import parse_args

    with pytest.raises(SystemExit):
        parse_args(argv)
    err = capsys.readouterr().err
    assert "must be" in err and "***" in err and "s3cret" not in err
