"""The server's shuffle: Fisher-Yates on OS randomness, unbiased, one read per shuffle."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

import pytest

from stacko.server import rng as rng_module
from stacko.server.rng import SystemShuffle


def _feed(monkeypatch: pytest.MonkeyPatch, words: list[int]) -> list[int]:
    """``os.urandom`` as the shuffle sees it: these 64-bit words, in order. Returns the sizes
    of the reads, to count them."""
    stream: Iterator[int] = iter(words)
    reads: list[int] = []

    def urandom(n: int) -> bytes:
        reads.append(n)
        assert n % 8 == 0
        return b"".join(next(stream).to_bytes(8, "little") for _ in range(n // 8))

    monkeypatch.setattr(rng_module.os, "urandom", urandom)
    return reads


def test_a_shuffle_is_a_permutation_read_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    shuffle = SystemShuffle()
    for n in (0, 1, 2, 40, 200):
        items = list(range(n))
        shuffle.shuffle(items)
        assert sorted(items) == list(range(n))
    reads = _feed(monkeypatch, [7] * 39)
    shuffle.shuffle(list(range(40)))
    assert reads == [8 * 39]


def test_every_word_combination_gives_each_permutation_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Three items: the first swap draws below 3, the second below 2. Words 0..5 cover every
    # pair of residues exactly once, so uniform words give uniform permutations.
    seen = []
    for first, second in itertools.product(range(3), range(2)):
        _feed(monkeypatch, [first, second])
        items = ["a", "b", "c"]
        SystemShuffle().shuffle(items)
        seen.append(tuple(items))
    assert sorted(seen) == sorted(itertools.permutations("abc"))


def test_the_same_words_shuffle_as_textbook_fisher_yates(monkeypatch: pytest.MonkeyPatch) -> None:
    words = [random.Random(5).getrandbits(64) for _ in range(29)]
    _feed(monkeypatch, words)
    got = list(range(30))
    SystemShuffle().shuffle(got)
    want = list(range(30))
    for k, i in enumerate(range(29, 0, -1)):
        j = words[k] % (i + 1)
        want[i], want[j] = want[j], want[i]
    assert got == want


def test_a_word_from_the_partial_last_run_is_drawn_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # 2**64 % 3 == 1: the word 2**64 - 1 would make residue 0 a little likelier than 1 and 2.
    reads = _feed(monkeypatch, [2**64 - 1, 4, 1])  # the two words read at once, then a redraw
    items = ["a", "b", "c"]
    SystemShuffle().shuffle(items)
    assert reads == [16, 8]
    # i=2: j = 1 (the redraw, 1 % 3) -> a c b; i=1: j = 4 % 2 = 0 -> c a b.
    assert items == ["c", "a", "b"]


def test_it_is_the_servers_default_source() -> None:
    from stacko.server.app import Server

    server = Server()
    assert isinstance(server.hub._hooks.rng_factory(), SystemShuffle)
    assert isinstance(SystemShuffle(), random.SystemRandom)


def test_games_share_one_source() -> None:
    """No per-game copy: a ``random.Random`` holds 2.5 KB of state SystemRandom never uses,
    and the server kept one for every game in progress."""
    from stacko.server.app import Server

    factory = Server().hub._hooks.rng_factory
    assert factory() is factory()
