"""Checkers for notebook 01: tokenization."""

from __future__ import annotations

from collections.abc import Callable

from course_utils.exercises.core import run_check
from course_utils.exercises.judge import Case, Problem, judge
from course_utils.lab.language import N_, tr, translated


def _counts(pairs) -> dict[tuple[int, int], int]:
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    return counts


# The usual mistakes, each as a function of ids, with the hint that names it.
_PAIR_MISTAKES = [
    (
        lambda ids: {pair: 1 for pair in zip(ids, ids[1:])},
        N_(
            "every count is 1: the pairs are right but a repeated pair is not counted again; "
            "add 1 to its count each time: counts[pair] = counts.get(pair, 0) + 1"
        ),
    ),
    (
        lambda ids: _counts(zip(ids[::2], ids[1::2])),
        N_("pairs overlap: [a, b, c] holds (a, b) and (b, c), so step by one"),
    ),
    (
        lambda ids: _counts(zip(ids[:-1], ids[1:-1])),
        N_("the last pair is missing (there are len(ids) - 1 pairs)"),
    ),
    (
        lambda ids: _counts(zip(ids[1:], ids[2:])),
        N_("the first pair is missing (there are len(ids) - 1 pairs)"),
    ),
    (
        lambda ids: _counts(zip(ids[1:], ids)),
        N_("the pairs are reversed: write (left, right) = (ids[i], ids[i + 1])"),
    ),
]


def _pairs_hint(answers: dict[tuple[int, ...], dict]) -> str:
    """Name the mistake that explains the answers to *every* case (one case alone can be
    ambiguous: on [1, 2, 3, 1, 2] "all counts 1" and "last pair missing" agree), or ''."""
    for mistake, hint in _PAIR_MISTAKES:
        if all(answer == mistake(list(ids)) for ids, answer in answers.items()):
            return tr("; {hint}").format(hint=translated(hint))
    return ""


def check_count_pairs(count_pairs: Callable) -> bool:
    """Check ``count_pairs(ids)``: how often each pair of adjacent ids occurs, as a dict
    ``{(left, right): count}`` (a ``Counter`` is fine). This is the statistic BPE training
    maximises (Sennrich et al. 2016, §3.2).

    Cases include ``[5, 5, 5]``, where the pair ``(5, 5)`` occurs twice (pairs overlap), and
    sequences of length 1 and 0 (no pairs). Names the usual mistakes: every count left at 1,
    pairs taken two by two, the first or last pair missed, (right, left) pairs.
    """
    cases = [
        [1, 2, 3, 1, 2],
        [3, 1, 2, 1, 2, 4],
        [5, 5, 5],
        [104, 101, 108, 108, 111, 32, 104, 101],
        [7],
        [],
    ]

    def attempt() -> str | None:
        answers = {}
        for ids in cases:
            answer = count_pairs(list(ids))
            if not isinstance(answer, dict):
                kind = type(answer).__name__
                return tr(
                    "count_pairs({ids}) should return a dict {{(left, right): count}}, got {kind}"
                ).format(ids=ids, kind=kind)
            answers[tuple(ids)] = {pair: count for pair, count in answer.items() if count != 0}
        for ids, answer in answers.items():
            expected = _counts(zip(ids, ids[1:]))
            if answer != expected:
                hint = _pairs_hint(answers)
                return (
                    tr("count_pairs({ids}) returned {answer}, expected {expected}").format(
                        ids=list(ids), answer=answer, expected=expected
                    )
                    + hint
                )
        return None

    return run_check("count_pairs", attempt)


def _merge(ids, pair, new_id, *, step=2, first_only=False, keep_last=True):
    """The merge written out; the keywords make the known mistakes."""
    merged, i, done = [], 0, False
    last = len(ids) if keep_last else len(ids) - 1
    while i < last:
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair) and not done:
            merged.append(new_id)
            i += step
            done = first_only
        else:
            merged.append(ids[i])
            i += 1
    return merged


MERGE_PAIR_MISTAKES = [
    (
        N_("the last id is missing: a lone last id must be copied too"),
        lambda ids, pair, new_id: _merge(ids, pair, new_id, keep_last=False),
    ),
    (
        N_(
            "after a merge the scan moves one id on, so the pair's second id is used again: "
            "skip both ids of the pair (i += 2)"
        ),
        lambda ids, pair, new_id: _merge(ids, pair, new_id, step=1),
    ),
    (
        N_(
            "a scan from the right: overlaps go to the leftmost match ([1, 1, 1] with (1, 1) "
            "gives [new_id, 1]); scan left to right"
        ),
        lambda ids, pair, new_id: _merge(ids[::-1], pair[::-1], new_id)[::-1],
    ),
    (
        N_("only the first occurrence merged: replace every occurrence"),
        lambda ids, pair, new_id: _merge(ids, pair, new_id, first_only=True),
    ),
    (
        N_("the pair matched in either order: (b, a) is another pair than (a, b)"),
        lambda ids, pair, new_id: _merge(_merge(ids, pair, new_id), tuple(pair[::-1]), new_id),
    ),
]


def check_merge_pair(merge_pair: Callable) -> bool:
    """Check ``merge_pair(ids, pair, new_id)``: a new list where each occurrence of ``pair``
    is replaced by ``new_id``, scanning left to right; the one step BPE repeats.

    Cases: two occurrences, an overlapping run ``[1, 1, 1]`` with the pair ``(1, 1)`` (the
    answer is ``[new_id, 1]``), a pair at the very end, no occurrence, an empty list, the
    reversed pair present, and multi-digit ids whose digits run across two ids when written
    as text (``[11, 22, 1, 2, 31, 2]`` with the pair ``(1, 2)``). The input list must not
    change (said with its name). A result holding an id that is neither in the input nor
    ``new_id`` is said to have run digits of neighbouring ids together (a replace over the ids
    written as text). Names each mistake of :data:`MERGE_PAIR_MISTAKES`.
    """
    from course_utils.tokenization import merge_pair as reference

    cases = [
        Case([5, 6, 5, 6, 7], (5, 6), 256),
        Case([1, 1, 1], (1, 1), 300),
        Case([4, 1, 2], (1, 2), 257),
        Case([1, 2, 3], (3, 4), 258),
        Case([], (1, 2), 259),
        Case([11, 22, 1, 2, 31, 2], (1, 2), 260),
        Case([2, 1, 7, 1, 2], (1, 2), 261),
    ]
    return judge("merge_pair", merge_pair, reference, cases, MERGE_PAIR_MISTAKES, call=_foreign_ids)


def _foreign_ids(merge_pair, ids, pair, new_id):
    """The answer, or a Problem when it holds an id that is neither in ``ids`` nor ``new_id``
    (digits of neighbouring ids run together)."""
    result = merge_pair(ids, pair, new_id)
    if isinstance(result, list) and all(isinstance(i, int) for i in result):
        foreign = [i for i in result if i not in ids and i != new_id]
        if foreign:
            return Problem(
                tr(
                    "the result {result} holds {foreign}, which is neither an id of the input "
                    "nor new_id: digits of neighbouring ids were run together (as a replace over "
                    "the ids written as text does); compare the ids themselves, pair by pair: "
                    "(ids[i], ids[i + 1]) == pair"
                ).format(result=result, foreign=foreign[0])
            )
    return result


def _join_hint(encoding, documents: list[str], answer: list, expected: list[int]) -> str:
    """Say how ``answer`` differs from ``expected`` in the exercise's words."""
    eot = encoding.eot_token
    if answer == expected[:-1]:
        return tr("the last document has no <|endoftext|> after it; end every document with one")
    if answer == [eot] + expected[:-1]:
        return tr("<|endoftext|> comes before each document; it must follow each document")
    if answer == [i for i in expected if i != eot]:
        return tr("no <|endoftext|> at all; append encoding.eot_token after each document")
    per_document = []
    for document in documents:
        per_document += encoding.encode(document, allowed_special="all") + [eot]
    if answer == per_document:
        return tr(
            "the text '<|endoftext|>' inside a document became the special token; encode "
            "each document with encode_ordinary"
        )
    where = next((i for i, (a, e) in enumerate(zip(answer, expected)) if a != e), None)
    if where is None:
        shared = min(len(answer), len(expected))
        return tr(
            "returned {count} ids, expected {expected}; the first {shared} agree, "
            "so ids are missing or extra at the end"
        ).format(count=len(answer), expected=len(expected), shared=shared)

    def show(token) -> str:
        try:
            return repr(encoding.decode([token]))
        except Exception:  # not a valid id
            return tr("not a token id")

    return tr(
        "the ids first differ at position {where}: {answer!r} ({answer_text}) "
        "where {expected} ({expected_text}) belongs"
    ).format(
        where=where,
        answer=answer[where],
        answer_text=show(answer[where]),
        expected=expected[where],
        expected_text=show(expected[where]),
    )


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
                return tr("{call} should return a list of ids, got {kind}").format(
                    call=call, kind=type(answer).__name__
                )
            if answer == expected:
                continue
            text = "".join(d + "<|endoftext|>" for d in documents)
            if answer == encoding.encode_ordinary(text):
                return tr(
                    "{call}: <|endoftext|> came out as ordinary text tokens; append the "
                    "special id encoding.eot_token instead"
                ).format(call=call)
            if answer == encoding.encode(text, allowed_special="all"):
                return tr(
                    "{call}: the text '<|endoftext|>' inside a document became the special "
                    "token; encode each document with encode_ordinary"
                ).format(call=call)
            if encoding.eot_token not in answer and 100257 in answer:
                return tr("{call} uses id 100257; take the id from encoding.eot_token").format(
                    call=call
                )
            hint = _join_hint(encoding, documents, answer, expected)
            return tr("{call}: {hint}").format(call=call, hint=hint)
        return None

    return run_check("join_documents", attempt)
