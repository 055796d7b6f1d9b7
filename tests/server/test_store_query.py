"""``GET /api/games`` is an index seek for every combination of filters, on SQLite and on
PostgreSQL: the query plans name an index on the most selective filter given, never a scan
of the games (an unknown player used to walk every finished game)."""

from __future__ import annotations

import itertools
import re

from stacko.server.store.base import Filters, finished_query

FILTERS = list(
    itertools.product(
        [None, "stakko"],  # game
        [None, "bob"],  # player
        [None, "ABCDEFGH"],  # code
        [None, "draw", "seat1", "resignation"],  # result
        [None, (1_000_500, "00000000000001f4")],  # cursor
    )
)


def seek_columns(f: Filters) -> set[str]:
    """The columns an index of the plan must seek on: the most selective filter given."""
    if f.code is not None:
        return {"code"}
    if f.player is not None:
        return {"player0", "player1"}
    if f.game is not None:
        return {"game"}
    if f.result is not None:
        return {"termination"} if f.result == "resignation" else {"winner"}
    return set()


async def fill(store, n: int = 2000) -> None:
    """``n`` games where every value the tests filter on is rare (as an unknown player is):
    where a value is common, walking the listing's order until a page is full is as good
    a plan as a seek, and PostgreSQL's statistics rightly pick it."""
    rows = []
    for i in range(n):
        rows.append(
            (
                "INSERT INTO games (id, code, game, variant, options, rules_version, public, "
                "players, player0, player1, status, result, winner, termination, started_ms, "
                "ended_ms, plies) VALUES (?, ?, ?, NULL, '{}', 1, 1, '[]', ?, ?, ?, '{}', ?, "
                "?, 0, ?, 3)",
                (
                    f"{i:016x}", f"ROOM{i % 500:04d}", "stakko" if i % 25 == 0 else "stacko",
                    "bob" if i % 50 == 0 else f"p{i % 97}", f"p{(i + 1) % 89}",
                    "finished" if i % 10 else "playing",
                    None if i % 30 == 0 else 1 if i % 31 == 0 else 0,
                    "resignation" if i % 40 == 1 else "completed",
                    None if i % 10 == 0 else 1_000_000 + i,
                ),
            )
        )  # fmt: skip
    await store.execute(rows)


async def plan(store, f: Filters) -> list[str]:
    sql, params = finished_query(store.GAME_COLUMNS, f)
    if store.kind == "sqlite":
        return [r[3] for r in await store.fetch("EXPLAIN QUERY PLAN " + sql, params)]
    return [r[0] for r in await store.fetch("EXPLAIN " + sql, params)]


async def test_every_filter_combination_is_an_index_seek(open_store):
    store = await open_store()
    await fill(store)
    if store.kind == "postgresql":
        await store.fetch("ANALYZE games")
    else:
        await store.execute([("ANALYZE", ())])
    for game, player, code, result, cursor in FILTERS:
        f = Filters(game, player, code, result, cursor, 20)
        lines = await plan(store, f)
        text = "\n".join(lines)
        want = seek_columns(f)
        if store.kind == "sqlite":
            assert not any(line.startswith("SCAN games") for line in lines if want), (f, text)
            seeks = re.findall(r"SEARCH games USING (?:COVERING )?INDEX \w+ \((\w+)", text)
            if not want:  # no filter: the listing's own order, stopped at the limit
                assert "INDEX games_ended" in text and "TEMP B-TREE" not in text, (f, text)
                continue
            assert seeks and set(seeks) <= want and want <= set(seeks) | {"code"}, (f, text)
            # each seek reads in the listing's order (no sort of everything it finds)
            assert text.count("TEMP B-TREE") <= (2 if player and not code else 0), (f, text)
        else:
            assert "Seq Scan" not in text, (f, text)
            if not want:
                assert "games_ended" in text, (f, text)
                continue
            conds = re.findall(r"Index Cond: \(\(?(\w+)", text)
            assert conds and set(conds) <= want | {"ended_ms"}, (f, text)
            assert want & set(conds), (f, text)


async def test_the_query_finds_what_the_filters_say(open_store):
    """The rewrite answers as the plain query does, page after page."""
    store = await open_store()
    await fill(store, 600)
    everything = await store.fetch(
        "SELECT id, code, game, player0, player1, winner, termination, ended_ms FROM games "
        "WHERE status = 'finished'"
    )
    for game, player, code, result, _ in FILTERS:
        want = [
            r for r in everything
            if (game is None or r[2] == game) and (player is None or player in (r[3], r[4]))
            and (code is None or r[1] == code)
            and (result is None or (result == "draw" and r[5] is None)
                 or (result == "seat1" and r[5] == 1) or r[6] == result)
        ]  # fmt: skip
        want.sort(key=lambda r: (r[7], r[0]), reverse=True)
        got: list[str] = []
        cursor = None
        while True:
            rows = await store.list_finished(Filters(game, player, code, result, cursor, 7))
            got += [r[0] for r in rows[:7]]
            if len(rows) <= 7:
                break
            cursor = (int(rows[6][11]), rows[6][0])
        assert got == [r[0] for r in want], (game, player, code, result)
