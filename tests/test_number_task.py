"""The number-translation task: words, digits and Chinese numerals agree (independent parsers),
batches are shifted by one for teacher forcing, and the split is deterministic and disjoint."""

from __future__ import annotations

import pytest
import torch

from course_utils.number_task import (
    NumberTask,
    all_pairs,
    exact_match,
    number_to_chinese,
    number_to_words,
    split_numbers,
)

WORD_VALUES = {
    **{w: i for i, w in enumerate("zero one two three four five six seven eight nine".split())},
    **{w: 10 + i for i, w in enumerate(
        "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
    )},
    **{w: 10 * i for i, w in enumerate(
        "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
    ) if i >= 2},
}  # fmt: skip
ZH_DIGITS = {c: i for i, c in enumerate("零一二三四五六七八九")}


def parse_words(text: str) -> int:
    total = 0
    for word in text.split():
        total = total * 100 if word == "hundred" else total + WORD_VALUES[word]
    return total


def parse_chinese(text: str) -> int:
    total, digit = 0, None
    for char in text:
        if char == "百":
            total, digit = total + 100 * digit, None
        elif char == "十":
            total, digit = total + 10 * (1 if digit is None else digit), None
        else:
            digit = ZH_DIGITS[char] if char != "零" or len(text) == 1 else None
    return total + (digit or 0)


def test_words_and_chinese_parse_back_to_the_number():
    for n in range(1000):
        assert parse_words(number_to_words(n)) == n, number_to_words(n)
        assert parse_chinese(number_to_chinese(n)) == n, number_to_chinese(n)


@pytest.mark.parametrize(
    ("n", "words", "chinese"),
    [
        (0, "zero", "零"), (7, "seven", "七"), (10, "ten", "十"), (15, "fifteen", "十五"),
        (40, "forty", "四十"), (42, "forty two", "四十二"), (100, "one hundred", "一百"),
        (105, "one hundred five", "一百零五"), (110, "one hundred ten", "一百一十"),
        (312, "three hundred twelve", "三百一十二"),
        (999, "nine hundred ninety nine", "九百九十九"),
    ],
)  # fmt: skip
def test_known_values(n, words, chinese):
    assert number_to_words(n) == words and number_to_chinese(n) == chinese


@pytest.mark.parametrize("bad", [-1, 1000])
def test_bad_numbers_raise(bad):
    with pytest.raises(ValueError, match=r"n must be an int in \[0, 999\]"):
        number_to_words(bad)
    with pytest.raises(ValueError, match=r"n must be an int in \[0, 999\]"):
        number_to_chinese(bad)


@pytest.mark.parametrize("bad", [3.0, True, "7"])
def test_numbers_of_another_type_raise_type_error(bad):
    with pytest.raises(TypeError, match=r"n must be an int, got"):
        number_to_words(bad)
    with pytest.raises(TypeError, match=r"n must be an int, got"):
        number_to_chinese(bad)


def test_vocabularies_are_sorted_and_complete():
    task = NumberTask.build()
    assert task.source_vocab[0] == "<pad>" and task.target_vocab[0] == "<pad>"
    assert task.source_vocab[1:] == sorted(task.source_vocab[1:])
    assert set("0123456789零一二三四五六七八九十百") <= set(task.target_vocab)
    assert task == NumberTask.build()


def test_batch_is_shifted_by_one_and_right_padded():
    task = NumberTask.build()
    batch = task.batch([312, 7], ["chinese", "digits"])
    assert batch["src"].shape == (2, 3) and batch["tgt_in"].shape == batch["tgt_out"].shape
    assert batch["tgt_in"][0, 0] == task.tag_id("chinese")
    assert torch.equal(batch["tgt_in"][0, 1:], batch["tgt_out"][0, :-1])
    assert batch["tgt_out"][0, -1] == task.eos_id
    assert task.decode_target(batch["tgt_out"][0]) == "三百一十二"
    assert task.decode_target(batch["tgt_in"][1]) == "7"
    assert batch["src"][1].tolist()[1:] == [0, 0]
    assert [task.source_vocab[i] for i in batch["src"][0]] == ["three", "hundred", "twelve"]


def test_split_is_deterministic_and_disjoint():
    train, test = split_numbers(0.2, seed=0)
    assert (train, test) == split_numbers(0.2, seed=0)
    assert len(test) == 200 and not set(train) & set(test) and len(train) + len(test) == 1000
    assert split_numbers(0.2, seed=1)[1] != test
    numbers, outputs = all_pairs([5, 6])
    assert numbers == [5, 5, 6, 6] and outputs == ["digits", "chinese", "digits", "chinese"]


def test_exact_match_and_bad_arguments():
    task = NumberTask.build()
    assert exact_match(task, ["312", "三百一十"], [312, 312], ["digits", "chinese"]) == 0.5
    with pytest.raises(ValueError, match="as many predictions"):
        exact_match(task, ["1"], [1, 2], ["digits", "digits"])
    with pytest.raises(ValueError, match="output must be one of"):
        task.tag_id("french")
    with pytest.raises(ValueError, match="unknown source words"):
        task.encode_source("three thousand")
    with pytest.raises(ValueError, match="test_fraction"):
        split_numbers(1.5)


def test_notebook_14_prose_numbers_match_its_outputs():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "notebooks" / "14_encoder_decoder.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    prose = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    outputs = "".join(
        "".join(o.get("text", "")) for c in cells if c["cell_type"] == "code" for o in c["outputs"]
    )
    train, test = split_numbers(0.2, seed=0)
    assert f"{len(train)} for training, {len(test)} held out" in outputs
    assert f"the {len(test)} numbers never seen" in prose and f"All {len(train)} training" in prose
    assert "(B=2, T_src=4)" in outputs and "(B=2, T_tgt=6)" in outputs
    assert "T_src = 4" in prose and "T_tgt = 6" in prose
