"""Checkers for notebook 01: tokenization."""

from __future__ import annotations

from collections.abc import Callable

from course_utils.exercises.core import run_check


def check_count_pairs(count_pairs: Callable) -> bool:
    """Check ``count_pairs(ids)``: how often each pair of adjacent ids occurs, as a dict
    ``{(left, right): count}`` (a ``Counter`` is fine). This is the statistic BPE training
    maximises (Sennrich et al. 2016, §3.2).

    Cases include ``[5, 5, 5]``, where the pair ``(5, 5)`` occurs twice (pairs overlap), and
    sequences of length 1 and 0 (no pairs). Says when the pairs were taken two by two or the
    last pair was missed.
    """
    cases = [[1, 2, 3, 1, 2], [5, 5, 5], [104, 101, 108, 108, 111, 32, 104, 101], [7], []]

    def attempt() -> str | None:
        for ids in cases:
            expected: dict[tuple[int, int], int] = {}
            for pair in zip(ids, ids[1:]):
                expected[pair] = expected.get(pair, 0) + 1
            answer = count_pairs(list(ids))
            call = f"count_pairs({ids})"
            if not isinstance(answer, dict):
                kind = type(answer).__name__
                return f"{call} should return a dict {{(left, right): count}}, got {kind}"
            answer = {pair: count for pair, count in answer.items() if count != 0}
            if answer == expected:
                continue
            two_by_two: dict[tuple[int, int], int] = {}
            for pair in zip(ids[::2], ids[1::2]):
                two_by_two[pair] = two_by_two.get(pair, 0) + 1
            hint = ""
            if answer == two_by_two:
                hint = "; pairs overlap: [a, b, c] holds (a, b) and (b, c), so step by one"
            elif len(ids) > 1 and sum(answer.values()) == len(ids) - 2:
                hint = "; the last pair is missing (there are len(ids) - 1 pairs)"
            return f"{call} returned {answer}, expected {expected}{hint}"
        return None

    return run_check("count_pairs", attempt)


def check_merge_pair(merge_pair: Callable) -> bool:
    """Check ``merge_pair(ids, pair, new_id)``: a new list where each occurrence of ``pair``
    is replaced by ``new_id``, scanning left to right; the one step BPE repeats.

    Cases: two occurrences, an overlapping run ``[1, 1, 1]`` with the pair ``(1, 1)`` (the
    answer is ``[new_id, 1]``), a pair at the very end, no occurrence, an empty list. The
    input list must not change. Says when the last id is dropped.
    """
    from course_utils.tokenization import merge_pair as reference

    cases = [
        ([5, 6, 5, 6, 7], (5, 6), 256),
        ([1, 1, 1], (1, 1), 300),
        ([4, 1, 2], (1, 2), 257),
        ([1, 2, 3], (3, 4), 258),
        ([], (1, 2), 259),
    ]

    def attempt() -> str | None:
        for ids, pair, new_id in cases:
            given = list(ids)
            answer = merge_pair(given, pair, new_id)
            expected = reference(ids, pair, new_id)
            call = f"merge_pair({ids}, {pair}, {new_id})"
            if given != ids:
                return f"{call} changed its input list to {given}; build a new list"
            if not isinstance(answer, list):
                return f"{call} should return a list, got {type(answer).__name__}"
            if answer == expected:
                continue
            hint = ""
            if answer == expected[:-1]:
                hint = "; the last id is missing: a lone last id must be copied too"
            elif ids == [1, 1, 1]:
                hint = "; scan left to right and, after a merge, skip both ids of the pair"
            return f"{call} returned {answer}, expected {expected}{hint}"
        return None

    return run_check("merge_pair", attempt)


def check_join_documents(join_documents: Callable) -> bool:
    """Check ``join_documents(encoding, documents)``: the ids of each document, each followed
    by the special token ``<|endoftext|>`` (``encoding.eot_token``), as GPT-2-style training
    data is laid out.

    Tried with tiktoken's ``cl100k_base`` and ``o200k_base`` (different end-of-text ids), on
    documents in English and Chinese, one of which contains the *text* ``<|endoftext|>``: a
    document's text must never turn into the special token (encode documents as ordinary
    text). Says when the separator came out as ordinary text or was hard-coded.
    """
    from course_utils.tokenization import load_encoding

    documents = ["Hello world.", "我爱北京天安门", "Write <|endoftext|> to end a text."]

    def attempt() -> str | None:
        for name in ("cl100k_base", "o200k_base"):
            encoding = load_encoding(name)
            expected = []
            for document in documents:
                expected += encoding.encode_ordinary(document) + [encoding.eot_token]
            answer = join_documents(encoding, list(documents))
            call = f"join_documents({name}, documents)"
            if not isinstance(answer, list):
                return f"{call} should return a list of ids, got {type(answer).__name__}"
            if answer == expected:
                continue
            text = "".join(d + "<|endoftext|>" for d in documents)
            if answer == encoding.encode_ordinary(text):
                return (
                    f"{call}: <|endoftext|> came out as ordinary text tokens; append the "
                    "special id encoding.eot_token instead"
                )
            if answer == encoding.encode(text, allowed_special="all"):
                return (
                    f"{call}: the text '<|endoftext|>' inside a document became the special "
                    "token; encode each document with encode_ordinary"
                )
            if encoding.eot_token not in answer and 100257 in answer:
                return f"{call} uses id 100257; take the id from encoding.eot_token"
            return f"{call} returned {len(answer)} ids, expected {len(expected)}: {expected}"
        return None

    return run_check("join_documents", attempt)
