"""Checkers of notebook 01 (tokenization): each accepts the right answer, rejects typical
wrong ones with a message that says what is wrong, and never raises."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from course_utils.exercises import check_count_pairs, check_join_documents, check_merge_pair
from course_utils.exercises.nb01_tokenization import MERGE_PAIR_MISTAKES


def _verdict(capsys) -> str:
    return capsys.readouterr().out.strip()


# --- count_pairs ---


def count_pairs_right(ids):
    return Counter(zip(ids, ids[1:]))


def count_pairs_two_by_two(ids):
    return Counter(zip(ids[::2], ids[1::2]))


def count_pairs_missing_last(ids):
    return Counter((ids[i], ids[i + 1]) for i in range(len(ids) - 2))


def count_pairs_as_set(ids):
    return set(zip(ids, ids[1:]))


def count_pairs_never_incremented(ids):
    return {pair: 1 for pair in zip(ids, ids[1:])}  # forgot to add 1 on a repeat


def test_count_pairs_all_ones_is_not_called_a_missing_last_pair(capsys):
    # On [1, 2, 3, 1, 2] alone, "all counts 1" and "last pair missing" give the same dict; the
    # hint must still name the real mistake (issue 15).
    assert check_count_pairs(count_pairs_never_incremented) is False
    out = _verdict(capsys)
    assert "every count is 1" in out and "last pair" not in out


def test_count_pairs_accepts_a_counter_and_a_dict(capsys):
    assert check_count_pairs(count_pairs_right) is True
    assert _verdict(capsys) == "✅ count_pairs: correct"

    def as_dict(ids):
        counts = {}
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
        return counts

    assert check_count_pairs(as_dict) is True


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (count_pairs_two_by_two, "pairs overlap"),
        (count_pairs_missing_last, "the last pair is missing"),
        (count_pairs_as_set, "should return a dict"),
        (count_pairs_never_incremented, "every count is 1"),
        (lambda ids: count_pairs_right(ids[1:]), "the first pair is missing"),
        (lambda ids: count_pairs_right(ids[::-1]), "the pairs are reversed"),
    ],
)
def test_count_pairs_rejects_typical_mistakes(capsys, wrong, message):
    assert check_count_pairs(wrong) is False
    out = _verdict(capsys)
    assert out.startswith("❌ count_pairs:") and message in out


def test_count_pairs_unfinished(capsys):
    def stub(ids):
        raise NotImplementedError

    assert check_count_pairs(stub) is False
    assert _verdict(capsys) == "❌ count_pairs: not implemented yet"


# --- merge_pair ---


def merge_pair_right(ids, pair, new_id):
    merged, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def merge_pair_drops_last(ids, pair, new_id):
    merged, i = [], 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            merged.append(new_id)
            i += 2
        else:
            merged.append(ids[i])
            i += 1
    return merged


def merge_pair_right_to_left(ids, pair, new_id):
    return merge_pair_right(ids[::-1], pair[::-1], new_id)[::-1]


def merge_pair_in_place(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


def test_merge_pair_accepts_the_right_answer(capsys):
    assert check_merge_pair(merge_pair_right) is True
    assert _verdict(capsys) == "✅ merge_pair: correct"


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (merge_pair_drops_last, "the last id is missing"),
        (merge_pair_right_to_left, "scan left to right"),
        (merge_pair_in_place, "changes its argument ids in place"),
    ],
)
def test_merge_pair_rejects_typical_mistakes(capsys, wrong, message):
    assert check_merge_pair(wrong) is False
    out = _verdict(capsys)
    assert out.startswith("❌ merge_pair:") and message in out


@pytest.mark.parametrize("index", range(len(MERGE_PAIR_MISTAKES)))
def test_merge_pair_names_each_catalogued_mistake(index, capsys):
    message, wrong = MERGE_PAIR_MISTAKES[index]
    assert check_merge_pair(wrong) is False
    assert f"looks like {message}" in _verdict(capsys)


def test_merge_pair_catches_a_replace_over_the_ids_as_text(capsys):
    """Issue 42: ids whose digits run across two ids when joined ('11,22' holds '1,2')."""

    def as_text(ids, pair, new_id):
        text = " ".join(str(i) for i in ids)
        text = text.replace(f"{pair[0]} {pair[1]}", str(new_id))
        return [int(t) for t in text.split()]

    assert check_merge_pair(as_text) is False
    assert "digits of neighbouring ids were run together" in _verdict(capsys)


# --- join_documents ---


def join_right(encoding, documents):
    ids = []
    for document in documents:
        ids += encoding.encode_ordinary(document) + [encoding.eot_token]
    return ids


def join_as_text(encoding, documents):
    return encoding.encode_ordinary("".join(d + "<|endoftext|>" for d in documents))


def join_allowing_special_everywhere(encoding, documents):
    text = "".join(d + "<|endoftext|>" for d in documents)
    return encoding.encode(text, allowed_special="all")


def join_hard_coded(encoding, documents):
    ids = []
    for document in documents:
        ids += encoding.encode_ordinary(document) + [100257]
    return ids


def join_between_only(encoding, documents):
    return join_right(encoding, documents)[:-1]


def join_separator_first(encoding, documents):
    return [encoding.eot_token] + join_right(encoding, documents)[:-1]


def join_without_separator(encoding, documents):
    return [i for d in documents for i in encoding.encode_ordinary(d)]


def join_special_inside_documents(encoding, documents):
    ids = []
    for document in documents:
        ids += encoding.encode(document, allowed_special="all") + [encoding.eot_token]
    return ids


def join_reversed(encoding, documents):
    return join_right(encoding, documents[::-1])


def test_join_documents_never_answers_n_ids_expected_n(capsys):
    # Same length, different ids: the message must say where, not "returned 25, expected 25".
    for wrong in (join_separator_first, join_reversed, join_special_inside_documents):
        assert check_join_documents(wrong) is False
        out = _verdict(capsys)
        assert not re.search(r"returned (\d+) ids, expected \1\b", out), out


def test_join_documents_accepts_the_right_answer(capsys):
    assert check_join_documents(join_right) is True
    assert _verdict(capsys) == "✅ join_documents: correct"


@pytest.mark.parametrize(
    ("wrong", "message"),
    [
        (join_as_text, "came out as ordinary text tokens"),
        (join_allowing_special_everywhere, "inside a document became the special token"),
        (join_hard_coded, "uses id 100257; take the id from encoding.eot_token"),
        (join_between_only, "the last document has no <|endoftext|> after it"),
        (join_separator_first, "<|endoftext|> comes before each document"),
        (join_without_separator, "no <|endoftext|> at all"),
        (join_special_inside_documents, "inside a document became the special token"),
        (join_reversed, "the ids first differ at position 0"),
        (lambda encoding, documents: join_right(encoding, documents) + [0], "the first 25 agree"),
    ],
)
def test_join_documents_rejects_typical_mistakes(capsys, wrong, message):
    assert check_join_documents(wrong) is False
    out = _verdict(capsys)
    assert out.startswith("❌ join_documents:") and message in out


def test_join_documents_reports_an_exception_without_raising(capsys):
    def naive(encoding, documents):  # encode() refuses special tokens in the text
        return encoding.encode("".join(d + "<|endoftext|>" for d in documents))

    assert check_join_documents(naive) is False
    assert "raised ValueError" in _verdict(capsys)


# --- correct alternatives: each checker accepts more than one right answer ---


def merge_pair_skip_flag(ids, pair, new_id):
    merged, skip = [], False
    for current, following in zip(ids, list(ids[1:]) + [None]):
        if skip:
            skip = False
        elif (current, following) == pair:
            merged.append(new_id)
            skip = True
        else:
            merged.append(current)
    return merged


def merge_pair_recursive(ids, pair, new_id):
    if len(ids) < 2:
        return list(ids)
    if (ids[0], ids[1]) == pair:
        return [new_id] + merge_pair_recursive(ids[2:], pair, new_id)
    return [ids[0]] + merge_pair_recursive(ids[1:], pair, new_id)


@pytest.mark.parametrize("right", [merge_pair_skip_flag, merge_pair_recursive])
def test_merge_pair_accepts_other_right_answers(capsys, right):
    assert check_merge_pair(right) is True, _verdict(capsys)


def join_comprehension_with_single_token(encoding, documents):
    end = encoding.encode_single_token("<|endoftext|>")
    return [i for d in documents for i in [*encoding.encode_ordinary(d), end]]


def join_encode_with_special_disallowed_off(encoding, documents):
    # disallowed_special=() reads "<|endoftext|>" inside a document as ordinary text
    ids = []
    for document in documents:
        ids.extend(encoding.encode(document, disallowed_special=()))
        ids.append(encoding.eot_token)
    return ids


@pytest.mark.parametrize(
    "right", [join_comprehension_with_single_token, join_encode_with_special_disallowed_off]
)
def test_join_documents_accepts_other_right_answers(capsys, right):
    assert check_join_documents(right) is True, _verdict(capsys)
