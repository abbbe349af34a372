"""tiktoken's vocabulary as BPE merges and back.

tiktoken stores a byte-level BPE as ``mergeable_ranks``: each token's bytes and its rank (its
id, which is also its merge priority), not the list of merges. The two functions here move
between that table and the merges :class:`~course_utils.tokenization.bpe.BytePairTokenizer`
learns and applies (the idea of minbpe's ``recover_merges``; GPT-2, Radford et al. 2019, §2.2).
"""

from __future__ import annotations

NEVER = float("inf")  # the rank of a pair that was never merged


def merges_from_ranks(
    mergeable_ranks: dict[bytes, int],
) -> tuple[list[tuple[int, int]], list[int]]:
    """The merges behind a tiktoken vocabulary, earliest first, and the ids of the 256 bytes.

    tiktoken's encoder merges, again and again, the adjacent pair whose joined bytes have the
    lowest rank. So the token of rank ``r`` was made from the two pieces at which that
    procedure stops when it runs on the token's own bytes with only the ranks below ``r``.

    Returns:
        ``(merges, byte_ids)``: ``merges[i]`` is the pair of ids joined into id ``256 + i``;
        ``byte_ids[b]`` is the id of the single byte ``b``.

    Raises:
        ValueError: the ranks are not ``0..n-1`` with the 256 single bytes first, or a token
            cannot be split into two tokens of lower rank.
    """
    by_rank = sorted(mergeable_ranks.items(), key=lambda item: item[1])
    _check_ranks(by_rank)
    merges = []
    for token, rank in by_rank[256:]:
        parts = [bytes([b]) for b in token]
        while len(parts) > 2:
            candidates = [
                (mergeable_ranks.get(parts[i] + parts[i + 1], NEVER), i)
                for i in range(len(parts) - 1)
            ]
            best_rank, i = min(candidates)
            if best_rank >= rank:
                break
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        _check_split(token, rank, parts)
        merges.append((mergeable_ranks[parts[0]], mergeable_ranks[parts[1]]))
    return merges, [mergeable_ranks[bytes([b])] for b in range(256)]


def _check_ranks(by_rank: list[tuple[bytes, int]]) -> None:
    """The ranks, sorted, are ``0..n-1`` with the 256 single bytes first."""
    if [rank for _, rank in by_rank] != list(range(len(by_rank))):
        raise ValueError("ranks must be 0..n-1, each used once")
    if sorted(len(token) for token, _ in by_rank[:256]) != [1] * 256:
        raise ValueError("ranks 0..255 must be the 256 single bytes")


def _check_split(token: bytes, rank: int, parts: list[bytes]) -> None:
    """``token`` came apart into two earlier tokens, ``parts``."""
    if len(parts) != 2:
        raise ValueError(f"token {token!r} (rank {rank}) is not a merge of two earlier tokens")


def ranks_from_vocab(vocab: list[bytes]) -> dict[bytes, int]:
    """tiktoken's ``mergeable_ranks`` of a vocabulary: each token's bytes -> its id.

    Raises:
        ValueError: two ids stand for the same bytes (tiktoken keys tokens by bytes).
    """
    ranks = {token: token_id for token_id, token in enumerate(vocab)}
    _check_distinct(ranks, vocab)
    return ranks


def _check_distinct(ranks: dict[bytes, int], vocab: list[bytes]) -> None:
    """No two ids stand for the same bytes: ``ranks`` keeps one entry per id."""
    if len(ranks) != len(vocab):
        first_id: dict[bytes, int] = {}
        twins = [(first_id[t], i) for i, t in enumerate(vocab) if first_id.setdefault(t, i) != i]
        raise ValueError(f"ids {twins[:3]} stand for the same bytes; tiktoken needs one id each")
