"""Accounts: names that last, and the API tokens that prove them (issue 17).

A name is checked here before anything is stored (``name_problem``): NFKC-normalised,
3-20 characters, letters, digits and ``_ - .`` only (nothing invisible, no control, format
or bidirectional characters), and neither a reserved word nor, once folded to its
"skeleton", one of the built-in bots' names or a reserved word (``Easy``, ``3asy``,
``\u0435asy`` with a Cyrillic e and ``e.a.s.y`` are all ``easy``). Uniqueness is on the
case-folded NFKC form (``normalized``), enforced by the database.

A token is 32 random bytes (256 bits, URL-safe base64 after ``stk_``), shown once; the store
keeps its sha256 only. A token is looked up by that hash and then compared with
``hmac.compare_digest``; an unknown and a revoked token get the same answer, so nothing
tells a guesser whether a token ever existed. Every ``hello`` with a token asks the store
(never a cache): a token revoked on any node fails at the next ``hello`` everywhere, and at
once for the connections of this node.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from stacko.server.store.base import Op, Store

NAME_MIN = 3
NAME_MAX = 20
KINDS = ("human", "bot")
TOKEN_PREFIX = "stk_"
TOKEN_BYTES = 32

BUILTIN_BOTS = ("easy", "medium", "strong", "random", "search")
"""The built-in bot levels: their accounts are made by the server, nobody may register
them or a look-alike."""

RESERVED = (
    "admin", "administrator", "root", "system", "server", "stacko", "stakko", "moderator",
    "mod", "staff", "support", "official", "guest", "anonymous", "bot", "bots", "null",
    "none", "undefined", "seat", "spectator", "everyone", "you", "api", "www",
)  # fmt: skip

_PUNCT = "_-."

_CONFUSABLE = str.maketrans(
    {
        "0": "o", "1": "l", "i": "l", "|": "l", "!": "l", "3": "e", "4": "a", "5": "s",
        "7": "t", "8": "b", "9": "g", "$": "s", "@": "a",
        # Cyrillic and Greek letters drawn like Latin ones (after case folding)
        **dict(zip(
            "\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u0501\u051b"
            "\u051d\u04bb\u04cf\u043a\u043c\u0442\u0432\u043d\u03bf\u03b1\u03b5\u03bd"
            "\u03b9\u03ba\u03c4\u03c1\u03c5\u03c7\u03b2\u03b7\u0131",
            "aeopcyxsljdqwhlkmtbhoaevlktpuxbnl",
            strict=True,
        )),
    }
)  # fmt: skip


def normalize(name: str) -> str:
    """The form uniqueness is decided on: NFKC, case-folded, NFKC again."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", name).casefold())


def skeleton(name: str) -> str:
    """A name folded until look-alikes meet: accents dropped, confusable letters and digits
    mapped to one Latin letter, separators removed, ``rn`` read as ``m``, ``vv`` as ``w``."""
    text = unicodedata.normalize("NFKD", normalize(name))
    text = "".join(c for c in text if not unicodedata.combining(c))
    text = text.translate(_CONFUSABLE)
    text = "".join(c for c in text if c not in _PUNCT)
    return text.replace("rn", "m").replace("vv", "w")


_PROTECTED = {skeleton(n) for n in (*BUILTIN_BOTS, *RESERVED)}


@dataclass(frozen=True)
class NameProblem:
    code: str
    message: str


def name_problem(name: str, *, builtin: bool = False) -> NameProblem | None:
    """Why ``name`` may not be registered (``None``: it may, if free)."""
    text = unicodedata.normalize("NFKC", name)
    if not NAME_MIN <= len(text) <= NAME_MAX:
        return NameProblem(
            "bad_name_length", f"a name is {NAME_MIN} to {NAME_MAX} characters, not {len(text)}"
        )
    for i, c in enumerate(text):
        cat = unicodedata.category(c)
        if c in _PUNCT or cat[0] in "LN" or (cat[0] == "M" and i > 0):
            continue
        return NameProblem(
            "bad_name_characters",
            f"names hold letters, digits and {' '.join(_PUNCT)} only, not U+{ord(c):04X}",
        )
    if text[0] in _PUNCT:
        return NameProblem("bad_name_characters", "a name starts with a letter or a digit")
    if builtin:
        return None
    skel = skeleton(text)
    if skel in _PROTECTED or skel.removesuffix("bot") in _PROTECTED:
        return NameProblem(
            "reserved_name",
            "that name is reserved (or looks like a built-in bot's name or a reserved word)",
        )
    return None


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _ms() -> int:
    return int(time.time() * 1000)


@dataclass(eq=False)
class Account:
    """A registered name, as the server holds it while its owner is online."""

    id: str
    name: str
    kind: str
    builtin: bool = False
    ratings: dict[str, Any] = field(default_factory=dict)
    """game -> ``server.ratings.Rating`` (loaded lazily by ``server.ratings``)."""

    def wire(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind}


class AccountError(Exception):
    """A refused account request: an HTTP status, a stable code and a message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


class Accounts:
    """The account table, through the store; ``kick`` ends this node's sessions of an
    account whose token was rotated or revoked."""

    def __init__(
        self,
        store: Store,
        *,
        register_per_hour: float = 5.0,
        register_burst: int = 5,
        kick: Callable[[str], None] | None = None,
    ) -> None:
        self.store = store
        self.register_per_hour = register_per_hour
        self.register_burst = register_burst
        self.kick = kick
        self._buckets: dict[str, tuple[float, float]] = {}
        self.online: dict[str, Account] = {}
        """account id -> the one ``Account`` object of this node (ratings shared by every
        session of it)."""

    # -- registration ----------------------------------------------------------------

    def _allowed(self, ip: str, now: float) -> bool:
        burst = float(self.register_burst)
        rate = self.register_per_hour / 3600.0
        tokens, then = self._buckets.get(ip, (burst, now))
        tokens = min(burst, tokens + (now - then) * rate)
        ok = tokens >= 1.0
        self._buckets[ip] = (tokens - 1.0 if ok else tokens, now)
        if len(self._buckets) > 4096:
            self._buckets = {
                a: (t, w) for a, (t, w) in self._buckets.items() if t + (now - w) * rate < burst
            }
        return ok

    async def register(self, name: str, kind: str, ip: str) -> tuple[Account, str]:
        """A new account and its token (the only time the token exists outside the caller)."""
        if kind not in KINDS:
            raise AccountError(400, "bad_kind", f"kind must be human or bot, not {kind[:20]!r}")
        problem = name_problem(name)
        if problem is not None:
            raise AccountError(400, problem.code, problem.message)
        if ip and not self._allowed(ip, time.monotonic()):
            raise AccountError(
                429, "too_many_registrations",
                f"at most {self.register_per_hour:g} registrations per hour from one address",
            )  # fmt: skip
        text = unicodedata.normalize("NFKC", name)
        return await self._insert(text, kind, builtin=False)

    async def _insert(self, name: str, kind: str, *, builtin: bool) -> tuple[Account, str]:
        norm = normalize(name)
        if await self.store.fetch("SELECT id FROM accounts WHERE normalized = ?", (norm,)):
            raise AccountError(409, "name_taken", f"the name {name} is taken")
        token = new_token()
        account = Account(secrets.token_hex(8), name, kind, builtin)
        try:
            await self.store.execute(
                [
                    (
                        "INSERT INTO accounts (id, name, normalized, kind, token_hash, "
                        "created_ms, builtin) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (account.id, name, norm, kind, token_hash(token), _ms(), int(builtin)),
                    )
                ]
            )
        except Exception as exc:  # the UNIQUE constraint: registered meanwhile
            if "unique" in str(exc).lower() or "duplicate" in str(exc).lower():
                raise AccountError(409, "name_taken", f"the name {name} is taken") from None
            raise
        return account, token

    async def ensure_builtin(self, names: Iterable[str]) -> None:
        """Accounts for the built-in bots (kind ``bot``), made once; their tokens are never
        shown (nobody can sign in as them)."""
        for name in names:
            rows = await self.store.fetch(
                "SELECT id FROM accounts WHERE normalized = ?", (normalize(name),)
            )
            if not rows:
                await self._insert(name, "bot", builtin=True)

    async def builtin(self, name: str) -> Account | None:
        rows = await self.store.fetch(
            "SELECT id, name, kind, builtin FROM accounts WHERE normalized = ? AND builtin = 1",
            (normalize(name),),
        )
        return self._held(rows[0]) if rows else None

    def _held(self, row: tuple[Any, ...]) -> Account:
        account = self.online.get(row[0])
        if account is None:
            account = self.online[row[0]] = Account(row[0], row[1], row[2], bool(row[3]))
        return account

    # -- tokens ------------------------------------------------------------------------

    async def authenticate(self, token: str) -> Account | None:
        """The live account of ``token``, or ``None`` (unknown, revoked: the same)."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 100:
            return None
        want = token_hash(token)
        rows = await self.store.fetch(
            "SELECT id, name, kind, builtin, token_hash, revoked_ms FROM accounts "
            "WHERE token_hash = ?",
            (want,),
        )
        if not rows or not hmac.compare_digest(str(rows[0][4]), want) or rows[0][5] is not None:
            return None
        return self._held(rows[0])

    async def _authorized(self, token: str) -> Account:
        account = await self.authenticate(token)
        if account is None:
            raise AccountError(401, "bad_token", "the token is not a live account token")
        return account

    async def rotate(self, token: str) -> tuple[Account, str]:
        """A new token for the account; the old one stops working at once."""
        account = await self._authorized(token)
        fresh = new_token()
        await self.store.execute(
            [
                (
                    "UPDATE accounts SET token_hash = ?, rotated_ms = ? WHERE id = ? "
                    "AND token_hash = ? AND revoked_ms IS NULL",
                    (token_hash(fresh), _ms(), account.id, token_hash(token)),
                )
            ]
        )
        if await self.authenticate(fresh) is None:  # another rotation won the race
            raise AccountError(401, "bad_token", "the token is not a live account token")
        if self.kick is not None:
            self.kick(account.id)
        return account, fresh

    async def revoke(self, token: str) -> Account:
        """The token (and so the account) stops working for good; the name stays taken."""
        account = await self._authorized(token)
        ops: list[Op] = [
            ("UPDATE accounts SET revoked_ms = ? WHERE id = ?", (_ms(), account.id)),
        ]
        await self.store.execute(ops)
        if self.kick is not None:
            self.kick(account.id)
        return account

    async def find(self, name: str) -> tuple[Any, ...] | None:
        """``(id, name, kind, created_ms, revoked_ms)`` of the account named ``name``."""
        if len(name) > 4 * NAME_MAX or name_problem(name, builtin=True) is not None:
            return None  # no account has such a name (and PostgreSQL refuses a NUL: a 500)
        rows = await self.store.fetch(
            "SELECT id, name, kind, created_ms, revoked_ms FROM accounts WHERE normalized = ?",
            (normalize(name),),
        )
        return rows[0] if rows else None
