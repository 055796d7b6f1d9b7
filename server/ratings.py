"""Ratings: OpenSkill (Plackett-Luce), per game, for games between two accounts.

Why OpenSkill (``openskill`` on PyPI, maintained, MIT, pure Python): it is the Weng-Lin
Bayesian rating, a mean ``mu`` and a deviation ``sigma`` per player that shrinks as games
are played, with a published reference implementation we can check our numbers against;
the ``glicko2`` package on PyPI is a single unmaintained file. The model is scaled to the
familiar 1500 scale: ``mu`` 1500, ``sigma`` 500, ``beta`` 250, ``tau`` 5 (OpenSkill's
defaults 25, 25/3, 25/6, 25/300, times 60).

- One rating per game name: Stacko, and Stakko (all Stakko variants share one rating: a
  variant changes the board, not the skill being measured).
- A game is rated when its room says so (quick match between two accounts: always; a
  private room: if its creator asked, ``create_room.rated``; a challenge: if asked) and
  both seats are distinct accounts (a built-in bot is its level's account).
- An account is *provisional* in a game for its first ``PROVISIONAL_GAMES`` rated games.
- An abandoned, forfeited or resigned game is a loss for the seat that left (the engine's
  outcome already says so).
- At most ``pair_per_day`` rated games between the same two accounts in 24 hours, counted
  in the store (``rated_pairs``: shared by every node, kept across restarts); further games
  between them are played unrated, and the room says so. The start does not wait for the
  store: it decides by what this node knows (its own games, and the store's count as of the
  pair's last game here), and the store's answer, a moment later, makes a game that turns
  out to be one too many unrated while it plays.
- The new ratings are written in the same transaction as the game's result (the
  recorder's last batch), so a crash never keeps one without the other.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass
from typing import Any

from openskill.models import PlackettLuce

from stacko.protocol import frames
from stacko.server.accounts import Account, Accounts
from stacko.server.store.base import Op, Store

log = logging.getLogger("stacko.ratings")

PAIR_WINDOW_MS = 86_400_000
RATED_ROOM = 1
"""``games.rated``: the game's room is rated, the game is not (a guest, the pair limit)."""
RATED_GAME = 2
"""``games.rated``: the game is rated, for ``account0`` and ``account1``."""
MU = 1500.0
SIGMA = 500.0
MODEL = PlackettLuce(mu=MU, sigma=SIGMA, beta=SIGMA / 2, tau=MU / 300)
PROVISIONAL_GAMES = 10


@dataclass
class Rating:
    mu: float = MU
    sigma: float = SIGMA
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0

    @property
    def provisional(self) -> bool:
        return self.games < PROVISIONAL_GAMES


def rate(a: Rating, b: Rating, score_a: float) -> tuple[tuple[float, float], tuple[float, float]]:
    """New ``(mu, sigma)`` of both after a game that ``a`` won (1), drew (0.5) or lost (0)."""
    ra = MODEL.rating(mu=a.mu, sigma=a.sigma)
    rb = MODEL.rating(mu=b.mu, sigma=b.sigma)
    ranks = [1.0, 2.0] if score_a == 1 else [2.0, 1.0] if score_a == 0 else [1.0, 1.0]
    [[na], [nb]] = MODEL.rate([[ra], [rb]], ranks=ranks)
    return (na.mu, na.sigma), (nb.mu, nb.sigma)


def wire_rating(r: Rating) -> dict[str, Any]:
    return {
        "rating": round(r.mu),
        "deviation": round(r.sigma),
        "provisional": r.provisional,
        "games": r.games,
        "wins": r.wins,
        "draws": r.draws,
        "losses": r.losses,
    }


@dataclass(eq=False)
class PairCheck:
    """A rated game whose pair's count the store is asked for."""

    room: Any
    pair: tuple[Account, Account]
    """The game's accounts (a new tuple per game: a rematch's check is another)."""
    game_id: str
    key: tuple[str, str, str]
    """(game, account id, account id), the ids sorted."""


class Ratings:
    """Decides which games are rated, rates them at their end, and tells the room."""

    def __init__(self, store: Store, accounts: Accounts, pair_per_day: int = 10) -> None:
        self.store = store
        self.accounts = accounts
        self.pair_per_day = pair_per_day
        self.bots: dict[str, Account] = {}
        """bot level -> its account (loaded at start)."""
        self.live: dict[int, tuple[Account, Account]] = {}
        """id(room) -> the two accounts of its rated game in progress."""
        self._pairs: dict[tuple[str, str, str], dict[str, int]] = {}
        self.loading: dict[str, asyncio.Task[None]] = {}
        """Account id -> the loading of its ratings, for an account met in a request another
        node forwarded and at each rated game's start (no game is rated from ratings not
        loaded yet, nor from older ones than the store's at its start)."""
        self.checking: dict[int, PairCheck] = {}
        """id(room) -> the count of its pair's rated games, while the store is asked."""
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self, levels: dict[str, list[str]]) -> None:
        names = sorted({lvl for lvls in levels.values() for lvl in lvls})
        await self.accounts.ensure_builtin(names)
        for name in names:
            account = await self.accounts.builtin(name)
            if account is not None:
                await self.load(account)
                self.bots[name] = account

    async def load(self, account: Account) -> None:
        """Every rating of ``account`` into memory (at its ``hello``, bots at start, and at
        each rated game's start: another node may have rated it since). A rating is taken
        from the store only if it counts more games than the one in memory (which may be
        newer than the store's for a moment: committed with the game's result)."""
        rows = await self.store.fetch(
            "SELECT game, mu, sigma, games, wins, draws, losses FROM ratings WHERE account_id = ?",
            (account.id,),
        )
        for game, mu, sigma, games, w, d, lost in rows:
            held = account.ratings.get(game)
            if held is None or int(games) > held.games:
                account.ratings[game] = Rating(
                    float(mu), float(sigma), int(games), int(w), int(d), int(lost)
                )

    def refresh(self, account: Account) -> None:
        """Read ``account``'s ratings again, in the background: a game of it that ends
        before they are in is rated once they are (``finished``), never from older ones."""
        if account.id in self.loading:
            return
        task = asyncio.get_running_loop().create_task(self._refresh(account))
        self.loading[account.id] = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _refresh(self, account: Account) -> None:
        try:
            await self.load(account)
        except Exception:
            log.exception("the ratings of %s could not be loaded", account.name)
        finally:
            self.loading.pop(account.id, None)

    def account_of(self, player: Any) -> Account | None:
        if player is None:
            return None
        if player.bot_level is not None:
            return self.bots.get(player.bot_level)
        session = player.session
        return getattr(session, "account", None) if session is not None else None

    # -- the room's hooks ---------------------------------------------------------------

    def started(self, room: Any) -> str | None:
        """A game of ``room`` just started: is it rated? ``None`` if so, else why not (for
        a rated room only; unrated rooms get ``None`` too and are not rated)."""
        self.live.pop(id(room), None)
        if not getattr(room, "rated", False):
            return None
        a, b = (self.account_of(p) for p in room.players)
        why_not = None
        if a is None or b is None:
            why_not = "not rated: both players need an account"
        elif a is b:
            why_not = "not rated: the same account on both seats"
        record = getattr(room, "record", None)
        if record is not None:  # with the game's first statements: the same after a restart
            record.pending.append(
                (
                    "UPDATE games SET rated = ?, account0 = ?, account1 = ? WHERE id = ?",
                    (
                        RATED_ROOM if why_not else RATED_GAME,
                        a.id if a is not None else None,
                        b.id if b is not None else None,
                        record.id,
                    ),
                )
            )
        if why_not is None and a is not None and b is not None:
            game_id = record.id if record is not None else secrets.token_hex(8)
            key = (room.spec.name, *sorted((a.id, b.id)))
            times = self._known(key)
            if len(times) >= self.pair_per_day:
                why_not = self._over(a, b)
                if record is not None:
                    record.pending.append(
                        ("UPDATE games SET rated = ? WHERE id = ?", (RATED_ROOM, record.id))
                    )
        if why_not is not None or a is None or b is None:
            return why_not
        times[game_id] = int(time.time() * 1000)
        pair = self.live[id(room)] = (a, b)
        for account in pair:  # rated from its latest ratings (another node's games too)
            if not account.builtin:
                self.refresh(account)
        check = PairCheck(room, pair, game_id, key)
        self.checking[id(room)] = check
        task = asyncio.get_running_loop().create_task(self._count_pair(check))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    def _over(self, a: Account, b: Account) -> str:
        return f"not rated: {a.name} and {b.name} played {self.pair_per_day} rated games today"

    def _known(self, key: tuple[str, str, str]) -> dict[str, int]:
        """What this node knows of the pair's rated games of the last 24 h (game id ->
        start, ms): its own, and the store's rows as of its last count of the pair."""
        since = int(time.time() * 1000) - PAIR_WINDOW_MS
        times = self._pairs.get(key)
        if times is None:
            times = self._pairs[key] = {}
        for gid in [g for g, at in times.items() if at <= since]:
            del times[gid]
        if len(self._pairs) > 10_000:  # forget pairs with no rated game in the last 24 h
            self._pairs = {k: v for k, v in self._pairs.items() if v or k == key}
        return times

    async def _count_pair(self, check: PairCheck) -> None:
        """Count this game in ``rated_pairs``, then see whether it is among the pair's first
        ``pair_per_day`` of the last 24 h (in the order of the rows: the same answer on every
        node however their games interleave). A game still playing that is not is played
        unrated from then on; one that ended first stays rated (only games of this pair
        started elsewhere, or before a restart, that this node did not know of yet)."""
        a, b = check.pair
        room = check.room
        lo, hi = sorted((a.id, b.id))
        now = int(time.time() * 1000)
        since = now - PAIR_WINDOW_MS
        game = room.spec.name
        rated = True
        try:
            await self.store.execute(
                [
                    (
                        "DELETE FROM rated_pairs WHERE game = ? AND a = ? AND b = ? AND at_ms <= ?",
                        (game, lo, hi, since),
                    ),
                    (
                        "INSERT INTO rated_pairs (game_id, game, a, b, at_ms) "
                        "VALUES (?, ?, ?, ?, ?)",
                        (check.game_id, game, lo, hi, now),
                    ),
                ]
            )
            rows = await self.store.fetch(
                "SELECT game_id, at_ms FROM rated_pairs WHERE game = ? AND a = ? AND b = ? "
                "AND at_ms > ? ORDER BY at_ms, game_id",
                (game, lo, hi, since),
            )
            first = rows[: self.pair_per_day]
            rated = any(row[0] == check.game_id for row in first)
            times = self._known(check.key)
            times.update((str(g), int(at)) for g, at in rows)
            if not rated:  # it does not count
                times.pop(check.game_id, None)
                await self.store.execute(
                    [("DELETE FROM rated_pairs WHERE game_id = ?", (check.game_id,))]
                )
        except Exception:  # the store fails: the server is going down anyway
            log.exception("the rated games of %s and %s could not be counted", a.name, b.name)
        if self.checking.get(id(room)) is check:
            del self.checking[id(room)]
        if rated:
            return
        if self.live.get(id(room)) is check.pair:
            del self.live[id(room)]
            record = getattr(room, "record", None)
            if record is not None and record.id == check.game_id:  # nor after a restart
                self.store.submit(
                    [("UPDATE games SET rated = ? WHERE id = ?", (RATED_ROOM, check.game_id))]
                )
            room._room_update(self._over(a, b))
        else:
            log.warning(
                "a rated game of %s and %s ended before their count was back", a.name, b.name
            )

    async def restore(self, rooms: Any) -> int:
        """After ``recover``: rated rooms are rated again, their players' seats show their
        accounts, and the rated games in progress are rated again, for the accounts that
        started them (loaded with their ratings); returns how many games."""
        by_id = {room.record.id: room for room in rooms if room.record is not None}
        found = await self.store.fetch(
            "SELECT id, rated, account0, account1 FROM games WHERE status = 'playing' "
            "AND (rated IS NOT NULL OR account0 IS NOT NULL)"
        )
        rows = await self.store.fetch(
            "SELECT g.id, a.id, a.name, a.kind, a.builtin FROM games g JOIN accounts a "
            "ON a.id = g.account0 OR a.id = g.account1 "
            "WHERE g.status = 'playing' AND (g.rated IS NOT NULL OR g.account0 IS NOT NULL)"
        )
        accounts: dict[str, dict[str, Account]] = {}
        for game_id, *row in rows:
            if game_id not in by_id:
                continue
            account = self.accounts._held(tuple(row))
            if not account.ratings:
                await self.load(account)
            accounts.setdefault(game_id, {})[account.id] = account
        restored = 0
        for game_id, rated, a0, a1 in found:
            room = by_id.get(game_id)
            if room is None:
                continue
            held = accounts.get(game_id, {})
            room.rated = True
            seats = (held.get(a0) if a0 else None, held.get(a1) if a1 else None)
            for player, seated in zip(room.players, seats, strict=True):
                if player is not None and player.bot is None and seated is not None:
                    player.account = seated.kind
            a, b = seats
            # A game from schema 2 has no ``rated``: its accounts were set only if rated.
            if (RATED_GAME if rated is None else rated) == RATED_GAME and a and b:
                self.live[id(room)] = (a, b)
                restored += 1
        return restored

    def finished(self, room: Any, game_id: str, outcome: Any, at_ms: int) -> list[Op]:
        """The game ended: new ratings, as statements for the result's transaction; the
        change is kept on the room (``rating_change``) for the frame that follows."""
        pair = self.live.pop(id(room), None)
        if pair is None:
            return []
        room.rated_game = True  # the final state says a rating frame follows
        loading = [self.loading[a.id] for a in pair if a.id in self.loading]
        if loading:  # an account met a moment ago on another node: rated once it is loaded
            task = asyncio.get_running_loop().create_task(
                self._rate_later(room, pair, game_id, outcome, at_ms, loading)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return []
        return self._rate(room, pair, game_id, outcome, at_ms)

    async def _rate_later(
        self,
        room: Any,
        pair: tuple[Account, Account],
        game_id: str,
        outcome: Any,
        at_ms: int,
        loading: list[asyncio.Task[None]],
    ) -> None:
        await asyncio.wait(loading)
        self.store.submit(self._rate(room, pair, game_id, outcome, at_ms))
        self.announce(room)

    def _rate(
        self, room: Any, pair: tuple[Account, Account], game_id: str, outcome: Any, at_ms: int
    ) -> list[Op]:
        game = room.spec.name
        a, b = pair
        ra = a.ratings.setdefault(game, Rating())
        rb = b.ratings.setdefault(game, Rating())
        winner = outcome.winner
        score_a = 0.5 if winner is None else (1.0 if winner == 0 else 0.0)
        (mua, sa), (mub, sb) = rate(ra, rb, score_a)
        ops: list[Op] = []
        changes = []
        for seat, (acc, r, mu, sigma, score, opp) in enumerate(
            ((a, ra, mua, sa, score_a, b), (b, rb, mub, sb, 1.0 - score_a, a))
        ):
            before_mu, before_sigma = r.mu, r.sigma
            r.mu, r.sigma, r.games = mu, sigma, r.games + 1
            r.wins += score == 1.0
            r.draws += score == 0.5
            r.losses += score == 0.0
            ops.append(
                (
                    "INSERT INTO ratings (account_id, game, mu, sigma, games, wins, draws, "
                    "losses, updated_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                    "ON CONFLICT (account_id, game) DO UPDATE SET mu = excluded.mu, "
                    "sigma = excluded.sigma, games = excluded.games, wins = excluded.wins, "
                    "draws = excluded.draws, losses = excluded.losses, "
                    "updated_ms = excluded.updated_ms",
                    (acc.id, game, mu, sigma, r.games, r.wins, r.draws, r.losses, at_ms),
                )
            )
            ops.append(
                (
                    "INSERT INTO rated_games (account_id, game_id, game, opponent, score, "
                    "mu_before, sigma_before, mu_after, sigma_after, at_ms) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        acc.id,
                        game_id,
                        game,
                        opp.name,
                        score,
                        before_mu,
                        before_sigma,
                        mu,
                        sigma,
                        at_ms,
                    ),
                )
            )
            changes.append(
                {
                    "seat": seat, "name": acc.name, "kind": acc.kind,
                    "before": round(before_mu), "after": round(mu),
                    "delta": round(mu) - round(before_mu), "deviation": round(sigma),
                    "provisional": r.provisional,
                }
            )  # fmt: skip
        room.rating_change = {"game_id": game_id, "game": game, "changes": changes}
        return ops

    def announce(self, room: Any) -> None:
        """After the final state: a ``rating`` frame to the players and spectators."""
        change = getattr(room, "rating_change", None)
        if change is None:
            return
        room.rating_change = None
        frame = frames.encode({"type": "rating", "room": room.code, **change})
        for p in room.players:
            if p is not None and p.peer is not None:
                p.peer.send(frame)
        for peer in room.spectators:
            peer.send(frame)
