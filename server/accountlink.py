"""Where accounts meet the hub: account tokens at ``hello``, rated rooms, challenges.

The hub (compiled, synchronous) calls in here through ``Hub.accounts``; everything that
needs the store runs as a task and calls back into the hub on the loop.

``hello`` with ``account``: the hub hands the connection a placeholder session and keeps
what the connection sends until the store has answered (at most ``PENDING_MAX`` frames);
then either the welcome and those frames, in order, or a fatal ``bad_account`` error (an
unknown and a revoked token get the same one).

Challenges: ``challenge`` names an online account; it sees a ``challenged`` frame and has
``challenge_timeout_s`` to answer. ``accept_challenge`` starts a private room (the
challenger in seat 0), ``decline_challenge`` and the timeout end it with ``challenge_over``
on both sides. A session may have ``MAX_OUTGOING`` challenges waiting, an account
``MAX_INCOMING`` (per node). On a cluster, a challenge to an account online on another
node, and an answer to a challenge another node holds, go there (``cluster.presence``).

Online accounts are found by name in ``by_name`` (normalized name -> the sessions signed in
as it), never by a scan of the sessions.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from stacko.engine.errors import InvalidOptionsError
from stacko.engine.games import GAMES
from stacko.protocol import frames, messages
from stacko.protocol.errors import ErrorCode, ProtocolError
from stacko.protocol.games import CODECS
from stacko.server import matchmaking
from stacko.server.accounts import Account, Accounts, normalize
from stacko.server.clock import Timer
from stacko.server.ratings import Ratings

log = logging.getLogger("stacko.accounts")

MAX_OUTGOING = 3
MAX_INCOMING = 10


@dataclass(eq=False)
class PendingChallenge:
    id: str
    by: Any
    """The challenger's session."""
    to: Account
    target: Any
    """The session it was shown to."""
    game: str
    options: dict[str, Any]
    rated: bool
    expires: float
    timer: Timer | None = None


class AccountLink:
    def __init__(
        self, hub: Any, accounts: Accounts, ratings: Ratings, challenge_timeout_s: float = 60.0
    ) -> None:
        self.hub = hub
        self.accounts = accounts
        self.ratings = ratings
        self.challenge_timeout_s = challenge_timeout_s
        self.challenges: dict[str, PendingChallenge] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._started: dict[int, Any] = {}
        self._sweep: Timer | None = None
        self.by_name: dict[str, set[Any]] = {}
        """Normalized account name -> the sessions of this node signed in as it (some may
        have signed out or expired since: checked, and dropped, when looked at)."""
        self._kicks = 0
        self._kicked: dict[str, int] = {}
        """Account id -> the number of the last kick of it (a ``hello`` whose check began
        before it must not sign in: its store read may be from before the change)."""
        accounts.kick = self.kick

    # -- hello -------------------------------------------------------------------------

    def check_hello(self, peer: Any, msg: messages.Hello, placeholder: Any) -> None:
        task = asyncio.get_running_loop().create_task(self._check(peer, msg, placeholder))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _check(self, peer: Any, msg: messages.Hello, placeholder: Any) -> None:
        assert msg.account is not None
        began = self._kicks
        try:
            account = await self.accounts.authenticate(msg.account)
            if account is not None:
                await self.ratings.load(account)
            if account is not None and self._kicked.get(account.id, -1) >= began:
                account = None  # rotated or revoked while it was read: read again
                account = await self.accounts.authenticate(msg.account)
        except Exception:
            log.exception("account check failed")
            account = None
            error = (ErrorCode.INTERNAL_ERROR, "the account could not be checked; try again")
        else:
            error = (ErrorCode.BAD_ACCOUNT, "the account token is unknown or revoked")
        waiting = self.hub.take_pending(peer)
        if waiting is None:
            return  # the connection went away meanwhile
        if account is None:
            peer.fail(error[0], error[1], msg.id)
            return
        try:
            session = self.hub.welcome(peer, msg, account)
        except ProtocolError as exc:
            peer.fail(exc.code, exc.message, msg.id)
            return
        if session is not placeholder:
            # The connection holds the placeholder it got from ``hello``: from now on it
            # speaks for the real session (a new one, or one resumed by ``token``).
            peer.session = session
        for m in waiting:
            try:
                self.hub.handle(peer, session, m)
            except ProtocolError as exc:
                if exc.fatal:
                    peer.fail(exc.code, exc.message, exc.request_id)
                    return
                peer.send(frames.from_exception(exc, room=getattr(m, "room", None)))

    def signed_in(self, session: Any) -> None:
        """A session is (again) signed in as ``session.account`` on a connection."""
        name = normalize(session.account.name)
        self.by_name.setdefault(name, set()).add(session)
        self._prune(name)
        if len(self.by_name) > 2 * len(self.hub.sessions) + 1024:
            for other in list(self.by_name):
                self._prune(other)
        self._changed(name)

    def _prune(self, name: str) -> list[Any]:
        """The sessions signed in as ``name`` (forgetting those that are not any more)."""
        sessions = self.by_name.get(name)
        if sessions is None:
            return []
        live = self.hub.sessions
        for s in [
            s
            for s in sessions
            if s.account is None
            or normalize(s.account.name) != name
            or (s.peer is None and live.get(s.token) is not s)
        ]:
            sessions.discard(s)
        if not sessions:
            del self.by_name[name]
        return list(sessions)

    def _online(self, name: str) -> list[Any]:
        return [s for s in self._prune(name) if s.peer is not None]

    def online_count(self, name: str) -> int:
        """Connected sessions signed in as ``name`` here (the cluster's presence)."""
        return len(self._online(name))

    def online_names(self) -> list[str]:
        return [name for name in list(self.by_name) if self._online(name)]

    def _changed(self, name: str) -> None:
        cluster = self.hub.cluster
        if cluster is not None:
            cluster.presence.changed(name)

    def remote_account(self, signed: Any) -> Account | None:
        """The account a forwarded request's node has its session signed in as; its
        ratings are loaded the first time this node meets it."""
        if signed is None:
            return None
        known = signed[0] in self.accounts.online
        account = self.accounts._held((signed[0], signed[1], signed[2], bool(signed[3])))
        if not known:
            self.ratings.refresh(account)
        return account

    def kick(self, account_id: str) -> None:
        """The account's token changed (rotated, revoked): its sessions end here and, on a
        cluster, on every other node at once."""
        self.kick_here(account_id)
        cluster = self.hub.cluster
        if cluster is not None:
            cluster.presence.kick(account_id)

    def kick_here(self, account_id: str) -> None:
        """Its connections here end now, and its sessions here are guests from now on (a
        session token must not keep an account signed in past its token, even one in its
        reconnect grace). A rare event: a scan of the sessions (forwarded ones too)."""
        self._kicked[account_id] = self._kicks
        self._kicks += 1
        if len(self._kicked) > 4096:  # only checks in flight need them: a few seconds' worth
            keep = self._kicks - 1024
            self._kicked = {a: n for a, n in self._kicked.items() if n >= keep}
        for session in list(self.hub.sessions.values()):
            account = session.account
            if account is None or account.id != account_id:
                continue
            session.account = None
            self._changed(normalize(account.name))
            fail = getattr(session.peer, "fail", None)  # a RemotePeer: its own node closes it
            if fail is not None:
                fail(ErrorCode.BAD_ACCOUNT, "the account token was rotated or revoked")

    # -- quick match by strength ------------------------------------------------------

    def partner(self, queue: list[Any], session: Any, game: str) -> int | None:
        return matchmaking.partner(queue, session, game, self.hub.clock.time())

    def waiting(self, game: str) -> None:
        """Someone joined a queue unpaired: sweep now and then while anyone waits."""
        if self._sweep is None:
            clock = self.hub.clock
            self._sweep = clock.call_at(clock.monotonic() + matchmaking.SWEEP_S, self._sweep_now)

    def _sweep_now(self) -> None:
        self._sweep = None
        now = self.hub.clock.time()
        for game, queue in self.hub.queues.items():
            for a, b in matchmaking.sweep(list(queue), game, now):
                try:
                    self.hub.pair_waiting(game, a, b)
                except ProtocolError as exc:  # server_busy: they wait on
                    log.warning("quick match sweep: %s", exc.message)
                    break
        if any(len(q) > 1 for q in self.hub.queues.values()):
            self.waiting("")

    # -- rated rooms -------------------------------------------------------------------

    def status(self, room: Any) -> None:
        """``Hub._status_changed`` of a rated room: a game started, or one ended."""
        status = room.status
        if status == "playing" and id(room) in self.ratings.live:
            self._started[id(room)] = room.game  # restored after a restart: decided before
        if status == "playing" and self._started.get(id(room)) is not room.game:
            self._started[id(room)] = room.game
            why_not = self.ratings.started(room)
            if why_not is not None and any(
                self.ratings.account_of(p) is not None for p in room.players
            ):
                room._room_update(why_not)
        elif status == "finished":
            self.ratings.announce(room)
        if room.code not in self.hub.rooms:
            self._started.pop(id(room), None)
            self.ratings.live.pop(id(room), None)

    # -- challenges --------------------------------------------------------------------

    def challenge_message(self, peer: Any, session: Any, msg: Any) -> None:
        match msg:
            case messages.Challenge():
                self._challenge(peer, session, msg)
            case messages.AcceptChallenge():
                self._accept(peer, session, msg)
            case messages.DeclineChallenge():
                if self._elsewhere(peer, session, msg):
                    return
                c = self._mine(session, msg.challenge)
                self._over(c, "declined", answer=(peer, msg.id))

    def _elsewhere(
        self, peer: Any, session: Any, msg: messages.AcceptChallenge | messages.DeclineChallenge
    ) -> bool:
        """Whether the answer went to the node that holds the challenge (not this one)."""
        cluster = self.hub.cluster
        if msg.challenge in self.challenges or cluster is None:
            return False
        if cluster.presence.local_only():
            return False
        cluster.presence.answer(peer, session, msg)
        return True

    def _challenge(self, peer: Any, session: Any, msg: messages.Challenge) -> None:
        if msg.game not in GAMES:
            raise ProtocolError(ErrorCode.UNKNOWN_GAME, f"no game {msg.game!r}; see list_games")
        try:
            CODECS[msg.game].options_from_wire(dict(msg.options))
        except ValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise ProtocolError(ErrorCode.BAD_OPTIONS, f"options: {first['msg']}") from None
        except InvalidOptionsError as exc:
            raise ProtocolError(ErrorCode.BAD_OPTIONS, str(exc)) from None
        mine = sum(1 for c in self.challenges.values() if c.by is session)
        if mine >= MAX_OUTGOING:
            raise ProtocolError(
                ErrorCode.TOO_MANY_CHALLENGES, f"you have {mine} challenges waiting already"
            )
        found = self._online(normalize(msg.to))
        target = found[-1] if found else None
        if target is None:
            cluster = self.hub.cluster
            if cluster is not None and not cluster.presence.local_only():
                cluster.presence.challenge(peer, session, msg)  # online on another node?
                return
            raise ProtocolError(ErrorCode.NOT_ONLINE, f"no account {msg.to} is online")
        if target is session or (
            session.account is not None and target.account.id == session.account.id
        ):
            raise ProtocolError(ErrorCode.NOT_ONLINE, "you cannot challenge yourself")
        incoming = sum(1 for c in self.challenges.values() if c.to.id == target.account.id)
        if incoming >= MAX_INCOMING:
            raise ProtocolError(
                ErrorCode.TOO_MANY_CHALLENGES, f"{target.account.name} has challenges enough"
            )
        clock = self.hub.clock
        expires = clock.time() + self.challenge_timeout_s
        c = PendingChallenge(
            secrets.token_hex(8), session, target.account, target, msg.game,
            dict(msg.options), msg.rated, expires,
        )  # fmt: skip
        # The timer runs on the monotonic clock (``expires`` is for the wire).
        c.timer = clock.call_at(
            clock.monotonic() + self.challenge_timeout_s, lambda: self._over(c, "expired")
        )
        self.challenges[c.id] = c
        if self.hub.cluster is not None:  # answerable through any node
            self.hub.cluster.presence.made(c.id, self.challenge_timeout_s)
        expires_ms = int(expires * 1000)
        peer.send(
            frames.reply(
                "challenge_sent", msg.id, challenge=c.id, to=target.account.name,
                expires_ms=expires_ms,
            )
        )  # fmt: skip
        target.peer.send(
            frames.encode(
                {
                    "type": "challenged", "challenge": c.id, "name": session.name,
                    "account": session.account.wire() if session.account is not None else None,
                    "game": c.game, "options": c.options, "rated": c.rated,
                    "expires_ms": expires_ms,
                }
            )
        )  # fmt: skip

    def gone(self, session: Any) -> None:
        """The session's connection went away: its challenges are cancelled (the other side
        gets ``challenge_over``); those waiting for it may still be answered on its return."""
        for c in [c for c in self.challenges.values() if c.by is session]:
            self._over(c, "cancelled")
        if session.account is not None:
            self._changed(normalize(session.account.name))

    def _mine(self, session: Any, cid: str) -> PendingChallenge:
        c = self.challenges.get(cid)
        if c is None or session.account is None or session.account.id != c.to.id:
            raise ProtocolError(ErrorCode.UNKNOWN_CHALLENGE, f"no challenge {cid} for you")
        return c

    def _accept(self, peer: Any, session: Any, msg: messages.AcceptChallenge) -> None:
        if self._elsewhere(peer, session, msg):
            return
        c = self._mine(session, msg.challenge)
        if c.by.peer is None:
            self._over(c, "cancelled", answer=(peer, msg.id))
            return
        loading = [
            self.ratings.loading[a.id]
            for a in (c.by.account, session.account)
            if a is not None and a.id in self.ratings.loading
        ]
        if c.rated and loading:  # an account from another node: its ratings first
            task = asyncio.get_running_loop().create_task(
                self._accept_later(peer, session, msg, c, loading)
            )
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            return
        self._drop(c)
        self.hub.start_pair(c.game, c.options, c.rated, [(c.by, None), (session, msg.id)])

    async def _accept_later(
        self, peer: Any, session: Any, msg: Any, c: PendingChallenge, loading: list[Any]
    ) -> None:
        await asyncio.wait(loading)
        try:
            if self.challenges.get(c.id) is not c:
                raise ProtocolError(ErrorCode.UNKNOWN_CHALLENGE, f"no challenge {c.id} for you")
            if c.by.peer is None:
                self._over(c, "cancelled", answer=(peer, msg.id))
                return
            self._drop(c)
            self.hub.start_pair(c.game, c.options, c.rated, [(c.by, None), (session, msg.id)])
        except ProtocolError as exc:
            exc.request_id = msg.id
            peer.send(frames.from_exception(exc))

    def _drop(self, c: PendingChallenge) -> None:
        self.challenges.pop(c.id, None)
        if self.hub.cluster is not None:
            self.hub.cluster.presence.ended(c.id)
        if c.timer is not None:
            c.timer.cancel()
            c.timer = None

    def _over(
        self, c: PendingChallenge, reason: str, answer: tuple[Any, Any] = (None, None)
    ) -> None:
        if self.challenges.get(c.id) is not c:
            return
        self._drop(c)
        frame = frames.reply("challenge_over", None, challenge=c.id, reason=reason)
        if c.by.peer is not None:
            c.by.peer.send(frame)
        asker, rid = answer
        if asker is not None:
            asker.send(frames.reply("challenge_over", rid, challenge=c.id, reason=reason))
        elif c.target.peer is not None:
            c.target.peer.send(frame)
