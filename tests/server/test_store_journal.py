"""The SQLite store's journal (``server.store.journal``): the commit point, its applier
process, recovery from it after a crash at any point, the data directory's lock, and the
faults that must stop the server with a clear message (a corrupt journal, an applier that
dies). Real files and real processes throughout."""

from __future__ import annotations

import asyncio
import itertools
import marshal
import os
import signal
import sqlite3

import pytest

from stacko.server.store import StoreError, journal, make_store, packed
from stacko.server.store import sqlite as sqlite_store
from stacko.server.store.sqlite import FILE_NAME


def game_row(gid: str, n: int = 0):
    return (
        "INSERT INTO games (id, code, game, variant, options, rules_version, public, players, "
        "player0, player1, status, started_ms) "
        "VALUES (?, 'ABCDEF', 'stacko', NULL, '{}', 1, 1, '[]', 'a', 'b', 'playing', ?)",
        (gid, n),
    )


def log_row(gid: str, seq: int):  # as the recorder's (and a compaction's) are written
    return (journal.LOG_SQL, (gid, seq, "move", 0, seq, "{}", 0))


def gid(i: int) -> str:
    return f"{i:016x}"


def count(data_dir, sql: str) -> int:
    """Read the file directly, as another process would."""
    conn = sqlite3.connect(os.path.join(data_dir, FILE_NAME))
    try:
        return int(conn.execute(sql).fetchone()[0])
    finally:
        conn.close()


async def left_behind(data, journal_bytes: bytes, applied: int = 0) -> int:
    """A data directory as a crash leaves it: a database (opened and closed once), then
    ``journal_bytes`` as the next journal file, of which SQLite holds the first ``applied``
    records (its position mid-file). The file's generation."""
    await (await opened(data)).close()
    conn = sqlite3.connect(data / FILE_NAME, isolation_level=None)
    try:
        gen = journal.position(conn)[0]
        (data / journal.file_name(gen)).write_bytes(journal_bytes)
        if applied:
            done = journal.decode(journal_bytes)[0][:applied]
            journal.apply(conn, done, gen, done[-1][2])
    finally:
        conn.close()
    return gen


async def opened(data_dir):
    store = make_store("sqlite", str(data_dir))
    await store.open()
    assert store.writer == "journal"
    return store


def test_records_decode_back_and_a_cut_or_damaged_tail_is_found():
    ops = [game_row(gid(1)), log_row(gid(1), 1)]
    data = journal.encode(1, ops) + journal.encode(2, [log_row(gid(1), 2)])
    records, end, trouble = journal.decode(data)
    assert [(t, o) for t, o, _ in records] == [(1, ops), (2, [log_row(gid(1), 2)])]
    assert end == len(data) and trouble == "" and records[-1][2] == len(data)
    for cut in range(1, len(data) - records[0][2]):  # every cut of the second record
        got, end, trouble = journal.decode(data[:-cut])
        assert len(got) == 1 and end == records[0][2] and trouble
    damaged = bytearray(data)
    damaged[-3] ^= 0xFF
    got, end, trouble = journal.decode(bytes(damaged))
    assert len(got) == 1 and trouble == "a record that fails its CRC"


def test_a_file_cut_at_its_end_is_read_up_to_the_cut_and_corruption_before_it_refused(tmp_path):
    path = tmp_path / journal.file_name(1)
    whole = b"".join(journal.encode(t, [log_row(gid(1), t)]) for t in range(1, 11))
    path.write_bytes(whole[:-5])  # a kill -9 in the last write()
    assert [t for t, _, _ in journal.whole(str(path), 0)] == list(range(1, 10))
    path.write_bytes(whole + bytes(4096))  # a power loss: zeros past the last record
    assert len(journal.whole(str(path), 0)) == 10
    last = len(whole) - 10
    path.write_bytes(whole[:last] + bytes(10) + bytes(4096))  # its last blocks unwritten
    assert len(journal.whole(str(path), 0)) == 9
    damaged = bytearray(whole)
    damaged[40] ^= 0xFF  # inside the first record: nine whole records after it
    path.write_bytes(bytes(damaged))
    with pytest.raises(journal.JournalError, match="fails its CRC at byte 0"):
        journal.whole(str(path), 0)
    # a length made larger by damage: the whole records after it must not pass for a cut
    fifth = sum(len(journal.encode(t, [log_row(gid(1), t)])) for t in range(1, 5))
    damaged = bytearray(whole)
    damaged[fifth + 1] ^= 0x10
    path.write_bytes(bytes(damaged))
    with pytest.raises(journal.JournalError, match=f"cut short at byte {fifth}"):
        journal.whole(str(path), 0)


def test_a_page_a_power_loss_left_unwritten_ends_the_journal(tmp_path):
    """The file's window is allocated ahead (``JournalFile``): after a power loss a page the
    system had not written back reads as zeros, and later pages may have been written. The
    journal ends at the record that runs into such a page; a damaged byte is still refused."""
    path = tmp_path / journal.file_name(1)
    records = [journal.encode(t, [log_row(gid(1), t)]) for t in range(1, 200)]
    whole = b"".join(records)
    assert len(whole) > 3 * journal.PAGE
    hole = journal.PAGE  # the file's second page was not written back
    holed = whole[:hole] + bytes(journal.PAGE) + whole[hole + journal.PAGE :]
    path.write_bytes(holed)
    kept = journal.whole(str(path), 0)
    assert kept and kept[-1][2] <= hole  # every record before the page, none after
    assert len(kept) == sum(
        1 for i in range(len(records)) if len(b"".join(records[: i + 1])) <= hole
    )
    damaged = bytearray(whole)
    after = next(n for n in itertools.accumulate(map(len, records)) if n >= hole)
    damaged[after + journal.HEADER.size + 5] ^= 0xFF  # a byte, not a page: records after it
    path.write_bytes(bytes(damaged))
    with pytest.raises(journal.JournalError, match="fails its CRC"):
        journal.whole(str(path), 0)


def test_a_journal_file_is_cut_to_its_records_when_closed(tmp_path):
    """Its window (``JournalFile``) is allocated ahead; a clean stop leaves no zeros."""
    f = journal.JournalFile(str(tmp_path / "j.log"))
    records = [
        journal.encode_event(t, gid(t).encode(), b'[1,"move",0,1,5,{}]\n') for t in range(1, 2000)
    ]
    for r in records:
        f.write(r)
    size = (tmp_path / "j.log").stat().st_size
    assert size > f.offset == sum(map(len, records))  # allocated past the records
    f.close()
    data = (tmp_path / "j.log").read_bytes()
    assert data == b"".join(records)
    decoded, end, trouble = journal.decode(data)
    assert (len(decoded), end, trouble) == (len(records), len(data), "")
    assert decoded[0][1] == [journal.event_op(gid(1), b'[1,"move",0,1,5,{}]\n')]


async def test_a_change_is_readable_at_once_and_in_the_file_soon_after(tmp_path):
    data = tmp_path / "data"
    store = await opened(data)
    try:
        store.submit([game_row(gid(1))])
        assert store.committed == store.appended == 1 and not store.holding  # no frame waits
        # a read waits for the applier: it sees every change committed before it
        assert await store.fetch("SELECT count(*) FROM games") == [(1,)]
        assert store.applied == 1 and store.stats.applied_changes == 1
        assert count(data, "SELECT count(*) FROM games") == 1  # another process sees it too
    finally:
        await store.close()
    assert journal.generations(str(data)) == []  # a clean stop leaves no journal


async def test_the_applier_batches_what_came_while_it_worked(tmp_path):
    store = await opened(tmp_path / "data")
    try:
        for i in range(500):
            store.submit([game_row(gid(i), i)])
            if i % 50 == 0:
                await asyncio.sleep(0)  # a loop turn: a note to the applier
        await store.flush()
        s = store.stats
        assert s.commits == s.changes == 500  # a write() each
        assert s.applied_changes == 500 and s.applies < 500
        assert await store.fetch("SELECT count(*) FROM games") == [(500,)]
    finally:
        await store.close()


async def test_a_restart_applies_what_sqlite_did_not_get_once(tmp_path):
    """A crash with the journal ahead of SQLite: part of it applied (the position says how
    far), the rest not, its last record cut by the crash. The restart applies exactly the
    rest (a change applied twice would break the games' primary key)."""
    data = tmp_path / "data"
    records = [journal.encode(i + 1, [game_row(gid(i), i)]) for i in range(30)]
    await left_behind(data, b"".join(records) + records[0][:7], applied=10)
    store = await opened(data)
    try:
        assert store.recovered == 20
        assert await store.fetch("SELECT count(*) FROM games") == [(30,)]
        assert [p.name for p in data.iterdir() if p.name.startswith("journal-")] == [
            journal.file_name(store._jgen)
        ]  # the old journal is gone; the new one is empty
        assert (data / journal.file_name(store._jgen)).stat().st_size == 0
    finally:
        await store.close()


async def test_a_corrupt_journal_stops_the_start_with_a_message(tmp_path):
    data = tmp_path / "data"
    records = b"".join(journal.encode(i + 1, [game_row(gid(i))]) for i in range(5))
    damaged = bytearray(records)
    damaged[len(records) // 2] ^= 0xFF
    gen = await left_behind(data, bytes(damaged))
    store = make_store("sqlite", str(data))
    with pytest.raises(StoreError, match=r"cannot recover the journal: .*journal-\d{8}\.log"):
        await store.open()
    assert count(data, "SELECT count(*) FROM games") == 0  # nothing after the damage applied
    # the lock was let go: once the file is moved aside, a start works
    os.rename(data / journal.file_name(gen), tmp_path / "aside.log")
    await (await opened(data)).close()


async def test_a_second_server_on_the_same_directory_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(sqlite_store, "LOCK_WAIT_S", 0.3)
    data = tmp_path / "data"
    first = await opened(data)
    try:
        with pytest.raises(StoreError, match="in use by another server"):
            await opened(data)
    finally:
        await first.close()
    await (await opened(data)).close()  # free again


async def test_new_files_are_started_and_applied_ones_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(journal, "ROTATE_BYTES", 2_000)
    data = tmp_path / "data"
    store = await opened(data)
    try:
        first = store._jgen
        for i in range(300):
            store.submit([game_row(gid(i), i), log_row(gid(i), 1)])
            if i % 20 == 0:
                await asyncio.sleep(0)
        await store.flush()
        assert store._jgen - first >= 10  # rotated many times
        for _ in range(100):  # the applier deletes a file just after its last answer
            if journal.generations(str(data)) == [store._jgen]:
                break
            await asyncio.sleep(0.02)
        assert journal.generations(str(data)) == [store._jgen]
        assert await store.fetch("SELECT count(*) FROM event_log") == [(300,)]
    finally:
        await store.close()


async def test_an_applier_that_dies_stops_the_store_and_a_restart_recovers(tmp_path):
    data = tmp_path / "data"
    store = await opened(data)
    failures: list[BaseException] = []
    store.on_failure = failures.append
    store.submit([game_row(gid(1))])
    await store.flush()
    assert store._applier is not None
    os.kill(store._applier.pid, signal.SIGKILL)
    for _ in range(200):
        if failures:
            break
        await asyncio.sleep(0.01)
    assert failures and "applier" in str(failures[0]) and store.failed is not None
    store.submit([game_row(gid(2))])  # refused: a failed store takes nothing more
    assert store.appended == 1
    await store.close()
    store = await opened(data)
    try:
        assert await store.fetch("SELECT id FROM games") == [(gid(1),)]
    finally:
        await store.close()


async def test_the_applier_outlives_signals_to_its_group_and_stops_with_the_server(tmp_path):
    """Ctrl-C in a terminal and a service manager's SIGTERM reach the applier as well as
    the server: the applier waits for the server to close its pipe, applying everything."""
    store = await opened(tmp_path / "data")
    proc = store._applier
    assert proc is not None
    store.submit([game_row(gid(2))])
    await store.flush()  # the applier is at work (past its start)
    for sig in (signal.SIGINT, signal.SIGTERM):
        os.kill(proc.pid, sig)
    await asyncio.sleep(0.2)
    assert proc.poll() is None
    store.submit([game_row(gid(3))])
    await store.close()
    assert proc.poll() == 0
    assert count(tmp_path / "data", "SELECT count(*) FROM games") == 2


@pytest.mark.parametrize("change", ["statements", "line"])
async def test_a_journal_write_that_fails_stops_the_store_and_nothing_leaves(tmp_path, change):
    store = await opened(tmp_path / "data")
    failures: list[BaseException] = []
    store.on_failure = failures.append
    released: list[str] = []
    jfile = store._jfile
    assert jfile is not None
    jfile._end = jfile.offset  # the next record needs a new window of the file ...
    read_only = os.open(os.devnull, os.O_RDONLY)
    os.dup2(read_only, jfile.fd)  # ... and allocating it fails, as on a full disk
    os.close(read_only)
    if change == "line":  # a move's (``SQLiteStore.submit_line``'s lean way)
        store.submit_line(gid(1), b'[1,"move",0,1,5,{"move":{"action":"draw"}}]\n')
    else:
        store.submit([game_row(gid(1))])
    store.hold(released.append, "a frame showing the change")
    await asyncio.sleep(0.05)
    assert failures and isinstance(failures[0], OSError)
    assert released == [] and store.holding
    await store.close()


async def test_a_call_held_for_the_commit_runs_at_once_as_everything_is_committed(tmp_path):
    store = await opened(tmp_path / "data")
    try:
        out: list[str] = []
        store.hold(out.append, "before")
        store.submit([game_row(gid(1))])
        store.hold(out.append, "after")
        assert out == ["before", "after"] and store.stats.held_frames == 0
    finally:
        await store.close()


async def test_the_metrics_show_the_applier(tmp_path):
    from prometheus_client import CollectorRegistry, generate_latest

    from stacko.server.store.metrics import StoreCollector

    store = await opened(tmp_path / "data")
    try:
        for i in range(20):
            store.submit([game_row(gid(i))])
        await store.flush()
        registry = CollectorRegistry()
        registry.register(StoreCollector(store))
        page = generate_latest(registry).decode()
        assert "stacko_store_commits_total 20.0" in page  # a journal write each
        assert "stacko_store_applied_changes_total 20.0" in page
        assert "stacko_store_unapplied_changes 0.0" in page
    finally:
        await store.close()


async def test_a_change_sqlite_refuses_stops_the_applier_and_the_next_start(tmp_path):
    """A statement SQLite refuses (a bug, not a player's doing) is in the journal, so it is
    committed: the applier stops, the server with it, and a start says which file holds it
    rather than run without it."""
    data = tmp_path / "data"
    store = await opened(data)
    failures: list[BaseException] = []
    store.on_failure = failures.append
    store.submit([game_row(gid(1))])
    store.submit([("INSERT INTO no_such_table VALUES (?)", (1,))])
    for _ in range(300):
        if failures:
            break
        await asyncio.sleep(0.01)
    assert failures and "applier" in str(failures[0])
    await store.close()
    with pytest.raises(StoreError, match=r"journal-\d{8}\.log: SQLite refused a change"):
        await make_store("sqlite", str(data)).open()


async def test_nodes_sharing_a_directory_keep_a_journal_each(tmp_path):
    """Node processes on one machine may share a data directory (``--node-id``): each has
    its own journal and lock. A journal no server holds any more (a node renamed) is
    applied by the next start, whatever its name."""
    data = tmp_path / "data"
    a = make_store("sqlite", str(data), node_id="n0")
    b = make_store("sqlite", str(data), node_id="weird/id|x" * 3)
    await a.open()
    await b.open()
    try:
        a.submit([game_row(gid(1))])
        b.submit([game_row(gid(2))])
        await b.flush()
        await a.flush()
        assert await a.fetch("SELECT id FROM games ORDER BY id") == [(gid(1),), (gid(2),)]
        names = sorted(p.name for p in data.iterdir() if p.name.startswith("journal-"))
        assert names == sorted(
            [journal.file_name(a._jgen, "n0"), journal.file_name(b._jgen, b.key)]
        )
    finally:
        await b.close()
    # n0 "crashes": its journal holds a change SQLite does not have
    a._send_note = lambda *_, **__: None  # the applier hears of nothing more
    a.submit([game_row(gid(3))])
    assert a._applier is not None
    a._applier.kill()
    a._applier.wait()
    path = data / journal.file_name(a._jgen, "n0")
    saved = path.read_bytes()
    a.on_failure = lambda exc: None
    await a.close()
    path.write_bytes(saved)  # (as the crash left it)
    c = await opened(data)  # no --node-id: it applies n0's journal, which nobody holds
    try:
        assert c.recovered == 1
        assert await c.fetch("SELECT count(*) FROM games") == [(3,)]
        assert journal.keys(str(data)) == {""}
    finally:
        await c.close()


def test_journal_names_are_plain_words():
    assert journal.key_of("") == "" and journal.key_of("n1") == "n1"
    odd = journal.key_of("../etc/passwd")
    assert odd.isalnum() and odd != journal.key_of("../etc/passwd2")
    for key in ("", "n1", "node-7", odd):
        for gen in (1, 12345678):
            assert journal._parse(journal.file_name(gen, key)) == (key, gen)


async def test_a_start_with_another_writer_applies_a_journal_left_behind(tmp_path):
    """A server that crashed with its journal ahead of SQLite, restarted as a cluster node
    (the loop writer): the journal is applied first, not ignored."""
    data = tmp_path / "data"
    await left_behind(data, b"".join(journal.encode(i + 1, [game_row(gid(i))]) for i in range(4)))
    store = make_store("sqlite", str(data), node_id="n0", shared=True)
    await store.open()
    try:
        assert store.writer == "loop" and store.recovered == 4
        assert await store.fetch("SELECT count(*) FROM games") == [(4,)]
        assert journal.keys(str(data)) == set()
    finally:
        await store.close()


async def test_a_journal_moved_aside_mid_file_starts_a_fresh_generation(tmp_path):
    """The documented way out of a journal that cannot be applied is to move it aside; its
    position (part of it applied) then pointed into the new file of the same generation,
    and a crash before the applier's first transaction read that file from the stale
    offset: changes whose frames had left were skipped (a review found it)."""
    data = tmp_path / "data"
    records = b"".join(journal.encode(i + 1, [game_row(gid(i))]) for i in range(5))
    gen = await left_behind(data, records, applied=5)  # all 5 in, the position mid-file
    os.rename(data / journal.file_name(gen), tmp_path / "aside.log")
    store = await opened(data)
    failures: list[BaseException] = []
    store.on_failure = failures.append
    assert store._jgen == gen + 1
    store._send_note = lambda *a, **k: None  # the applier hears of nothing ...
    for i in range(7):
        store.submit([game_row(gid(100 + i))])
    assert store._notes is not None and store._applier is not None
    os.close(store._notes)  # ... until the server is gone: it applies what is there
    store._notes = None
    assert await asyncio.to_thread(store._applier.wait, 10) == 0
    assert count(data, "SELECT count(*) FROM games") == 12
    await store.close()


async def test_a_journal_the_previous_version_left_is_applied_with_lines_after_it(tmp_path):
    """The previous version wrote a move as a statement (``marshal``); this one writes its
    line. A crash just after an upgrade leaves both kinds in one directory: both apply."""
    data = tmp_path / "data"
    old = [journal.encode(1, [game_row(gid(1))])] + [
        journal.encode(1 + s, [log_row(gid(1), s)]) for s in (1, 2)
    ]  # exactly the previous version's records (its ``encode``, its statements)
    line = b'[3,"move",0,3,7,{"move":{"action":"take","slot":0}}]\n'
    await left_behind(data, b"".join(old) + journal.encode_event(4, gid(1).encode(), line))
    store = await opened(data)
    try:
        assert store.recovered == 4
        rows = await store.fetch("SELECT seq, kind, seat, ply, payload, at_ms FROM event_log")
        assert rows == [
            (1, "move", 0, 1, "{}", 0),
            (2, "move", 0, 2, "{}", 0),
            (3, "move", 0, 3, '{"move":{"action":"take","slot":0}}', 7),
        ]
    finally:
        await store.close()


EVENTS = (
    b'[1,"deal",null,0,5,{"perms":[[1,0]],"deadline_ms":9}]\n'
    b'[2,"move",0,1,6,{"move":{"action":"draw"}}]\n'
)


def finish_row(gid: str, record: bytes, sql: str = journal.FINISH_SQL):
    return (sql, ('{"winner":0}', 0, "turn_cap", 7, 1, 2, record, gid))


def test_a_finished_games_events_are_packed_where_the_journal_is_read():
    """The journal writer's recorder hands a game's events over unpacked; reading the
    journal (the applier's and a start's recovery, both ``decode``) packs them as the
    recorder would have."""
    ops = [game_row(gid(1)), finish_row(gid(1), EVENTS, journal.FINISH_EVENTS_SQL)]
    record = journal.encode(3, ops)
    payload = record[journal.HEADER.size :]
    assert payload[:1] == journal.PACKING and marshal.loads(payload[1:]) == ops
    with pytest.raises(ValueError):  # what a server from before reads: refused, not stored
        marshal.loads(payload)
    assert marshal.loads(journal.encode(3, ops[:1])[journal.HEADER.size :]) == ops[:1]
    ((ticket, ops, _),), _, trouble = journal.decode(record)
    assert (ticket, trouble) == (3, "")
    assert ops == [game_row(gid(1)), finish_row(gid(1), packed.pack(EVENTS))]
    assert [row[4] for row in packed.unpack(ops[1][1][6])] == [
        {"perms": [[1, 0]], "deadline_ms": 9}, {"move": {"action": "draw"}},
    ]  # fmt: skip


async def test_the_applier_packs_a_finished_games_events(tmp_path):
    from stacko.server.store.recorder import Recorder

    store = await opened(tmp_path / "data")
    try:
        assert store.packs_records and Recorder(store, None).packs
        store.submit([game_row(gid(1))])
        store.submit([finish_row(gid(1), EVENTS, journal.FINISH_EVENTS_SQL)])
        await store.flush()
        rows = await store.fetch("SELECT status, record FROM games WHERE id = ?", (gid(1),))
        assert rows == [("finished", packed.pack(EVENTS))]
    finally:
        await store.close()
    assert not make_store("sqlite", str(tmp_path / "d2"), writer="loop").packs_records


async def test_a_moves_line_is_committed_by_the_event_writer_as_its_record(tmp_path):
    """The recorder's commit of a move (``journal.EventWriter``, compiled) writes what
    ``encode_event`` makes, commits it within the call, counts it on ``/metrics``, and
    leaves a move to the store's general way while an earlier change is uncommitted."""
    data = tmp_path / "data"
    store = await opened(data)
    try:
        writer = store.event_writer
        assert writer is not None and store._jfile is not None
        before = store.stats.commits
        start = store._jfile.offset
        line = b'[1,"move",0,1,5,{"move":{"action":"draw"}}]\n'
        prefix, crc = journal.event_prefix(gid(1))
        assert writer.write(prefix, crc, line)
        assert store.committed == store.appended == 1 and not store.holding
        path = data / journal.file_name(store._jgen, store.key)
        written = path.read_bytes()[start : store._jfile.offset]
        assert written == journal.encode_event(1, gid(1).encode(), line)
        assert store.stats.commits == before + 1

        store.gate.holding = True  # as while a change waits for its commit
        offset = store._jfile.offset
        assert not writer.write(prefix, crc, line)
        assert (store.appended, store._jfile.offset) == (1, offset)  # nothing done
        store.gate.holding = False
        store.submit_line(gid(1), line.replace(b"[1,", b"[2,"))  # the store's own call
        assert store.committed == store.appended == 2
        assert await store.fetch("SELECT count(*) FROM event_log") == [(2,)]
    finally:
        await store.close()


async def test_a_games_log_rows_go_with_its_result(tmp_path):
    """The applier deletes a game's rows in the event log in the transaction that stores its
    result (``journal.LogRows``), also rows that were there before it started (a restart)."""
    data = tmp_path / "data"
    await (await opened(data)).close()
    conn = sqlite3.connect(data / FILE_NAME, isolation_level=None)
    logged = "SELECT game_id, seq FROM event_log ORDER BY id"
    try:
        log = journal.LogRows()
        first = [game_row(gid(1)), game_row(gid(2))]
        moves = [log_row(gid(1), 1), log_row(gid(2), 1), log_row(gid(1), 2)]
        journal.apply(conn, [(1, first, 0), (2, moves, 0)], 1, 0, log=log)
        assert log.by_game == journal.LogRows.load(conn).by_game == {gid(1): [1, 3], gid(2): [2]}
        journal.apply(conn, [(3, [finish_row(gid(1), EVENTS)], 0)], 1, 0, log=log)
        assert conn.execute(logged).fetchall() == [(gid(2), 1)]
        assert gid(1) not in log.by_game

        again = journal.LogRows.load(conn)  # a restart: the rows as the log holds them
        more = [log_row(gid(2), 2), finish_row(gid(2), EVENTS)]
        journal.apply(conn, [(4, more, 0)], 1, 0, log=again)
        assert conn.execute(logged).fetchall() == [] and again.by_game == {}
        journal.apply(conn, [(5, [log_row(gid(3), 1)], 0)], 1, 0)  # no LogRows: kept
        assert conn.execute(logged).fetchall() == [(gid(3), 1)]
    finally:
        conn.close()


async def test_a_start_deletes_log_rows_an_earlier_version_left_for_finished_games(tmp_path):
    """A log written before the applier deleted a game's rows with its result kept them for
    the compaction, which no longer comes due: the start's recovery deletes them, and only
    them (``journal.FINISHED_LOG_SQL``)."""
    data = tmp_path / "data"
    await (await opened(data)).close()
    conn = sqlite3.connect(data / FILE_NAME, isolation_level=None)
    try:  # as an earlier version left it: the rows applied without LogRows
        ops = [game_row(gid(1)), game_row(gid(2)), log_row(gid(1), 1), log_row(gid(2), 1)]
        journal.apply(conn, [(1, ops, 0), (2, [finish_row(gid(1), EVENTS)], 0)], 1, 0)
        assert conn.execute("SELECT count(*) FROM event_log").fetchone() == (2,)
    finally:
        conn.close()
    store = await opened(data)
    try:
        assert await store.fetch("SELECT game_id, seq FROM event_log") == [(gid(2), 1)]
        assert await store.fetch("SELECT status FROM games ORDER BY id") == [
            ("finished",),
            ("playing",),
        ]
    finally:
        await store.close()


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="SCHED_IDLE is Linux's")
@pytest.mark.parametrize("idle", ["", "0"])
async def test_the_applier_runs_only_on_an_idle_cpu_unless_told_not_to(tmp_path, monkeypatch, idle):
    """Nothing a player waits for waits for the applier: it takes ``SCHED_IDLE``
    (``journal.lower_priority``), and ``STACKO_JOURNAL_APPLIER_IDLE=0`` keeps it normal."""
    if idle:
        monkeypatch.setenv(journal.IDLE_ENV, idle)
    else:
        monkeypatch.delenv(journal.IDLE_ENV, raising=False)
    store = await opened(tmp_path / "data")
    try:
        store.submit([game_row(gid(1))])
        # a read waits for the applier's answer: it set its policy before serving
        assert await store.fetch("SELECT count(*) FROM games") == [(1,)]
        policy = os.sched_getscheduler(store._applier.pid)
        assert policy == (os.SCHED_OTHER if idle else os.SCHED_IDLE)
    finally:
        await store.close()
