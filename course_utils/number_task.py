"""A tiny translation task for the encoder–decoder: English number words to digits or to
Chinese numerals, e.g. ``"three hundred twelve"`` -> ``"312"`` or ``"三百一十二"``.

Everything is generated in code (no download), deterministically. The source side is a
sequence of English *words*; the target side a sequence of *characters*. The decoder's first
input token says which output to write (``<2d>`` digits, ``<2zh>`` Chinese), the way
multilingual translation models use a target-language tag. Each output character has a
clear source word it comes from ("3" and "三" from "three"), which makes the cross-attention
alignment easy to see.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from course_utils.checks import (
    as_id_list,
    check_choice,
    check_float,
    check_instance,
    check_int,
    check_text,
)

_ONES = "zero one two three four five six seven eight nine".split()
_TEENS = "ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split()
_TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
_ZH_DIGITS = "零一二三四五六七八九"

PAD, EOS = "<pad>", "<eos>"
TARGET_TAGS = {"digits": "<2d>", "chinese": "<2zh>"}
MAX_NUMBER = 999


def _check_number(n: object, name: str = "n") -> int:
    """``n`` as an int in ``[0, 999]`` (numpy ints too): TypeError for floats, bools, text.
    Messages call it ``name`` (the caller's argument, e.g. ``numbers[3]``)."""
    n = check_int(n, name)
    if not 0 <= n <= MAX_NUMBER:
        raise ValueError(f"{name} must be an int in [0, {MAX_NUMBER}], got {n!r}")
    return n


def _check_output(output: object, name: str = "output") -> None:
    """TypeError unless ``output`` is a str, ValueError unless it names a target tag.
    Messages call it ``name`` (e.g. ``outputs[3]``)."""
    if not isinstance(output, str):  # a list would fail the dict lookup as "unhashable"
        check_choice(output, name, tuple(sorted(TARGET_TAGS)))
    if output not in TARGET_TAGS:
        raise ValueError(f"{name} must be one of {sorted(TARGET_TAGS)}, got {output!r}")


def _check_list(value: object, name: str, example: str) -> list:
    """``value`` as a list, if it is a list or tuple (not one string, not a number)."""
    if isinstance(value, list | tuple):
        return list(value)
    fix = f"; for every item the same, pass [{value!r}] * n" if isinstance(value, str) else ""
    raise TypeError(f"{name} must be a list, e.g. {example}, got {type(value).__name__}{fix}")


def number_to_words(n: int) -> str:
    """English words for ``n``, space-separated, without "and" or hyphens.

    ``312`` -> ``"three hundred twelve"``, ``40`` -> ``"forty"``, ``0`` -> ``"zero"``.

    Raises:
        TypeError: ``n`` is not an int (``12.0``, ``"7"``, a bool).
        ValueError: ``n`` is not in ``[0, 999]``.
    """
    n = _check_number(n)
    if n == 0:
        return "zero"
    words = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words += [_ONES[hundreds], "hundred"]
    if 10 <= rest < 20:
        words.append(_TEENS[rest - 10])
    else:
        tens, ones = divmod(rest, 10)
        if tens:
            words.append(_TENS[tens])
        if ones:
            words.append(_ONES[ones])
    return " ".join(words)


def number_to_chinese(n: int) -> str:
    """Chinese numerals for ``n`` in the usual written form.

    ``312`` -> ``"三百一十二"``, ``305`` -> ``"三百零五"``, ``110`` -> ``"一百一十"``,
    ``15`` -> ``"十五"`` (a leading 一 is dropped before 十 only when there is no 百).

    Raises:
        TypeError: ``n`` is not an int (``12.0``, ``"7"``, a bool).
        ValueError: ``n`` is not in ``[0, 999]``.
    """
    n = _check_number(n)
    if n < 10:
        return _ZH_DIGITS[n]
    hundreds, rest = divmod(n, 100)
    tens, ones = divmod(rest, 10)
    text = f"{_ZH_DIGITS[hundreds]}百" if hundreds else ""
    if tens:
        text += ("" if tens == 1 and not hundreds else _ZH_DIGITS[tens]) + "十"
    elif hundreds and ones:
        text += "零"  # 305 -> 三百零五: the empty tens place is read as 零
    if ones:
        text += _ZH_DIGITS[ones]
    return text


@dataclass
class NumberTask:
    """Vocabularies and batches of the number-translation task.

    Attributes:
        source_vocab: sorted English words after ``<pad>`` (id 0).
        target_vocab: ``<pad>`` (id 0), ``<eos>``, the two target tags, then digits and
            Chinese numeral characters (sorted, so ids never change between runs).
    """

    source_vocab: list[str]
    target_vocab: list[str]

    @classmethod
    def build(cls) -> NumberTask:
        """The vocabularies of every number in ``[0, 999]``."""
        words = {w for n in range(MAX_NUMBER + 1) for w in number_to_words(n).split()}
        chars = {c for n in range(MAX_NUMBER + 1) for c in str(n) + number_to_chinese(n)}
        return cls([PAD, *sorted(words)], [PAD, EOS, *TARGET_TAGS.values(), *sorted(chars)])

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def eos_id(self) -> int:
        return self.target_vocab.index(EOS)

    def tag_id(self, output: str) -> int:
        """Id of the decoder's start token for ``output`` (``"digits"`` or ``"chinese"``).

        Raises:
            TypeError: ``output`` is not a str (``["digits"]``: pass ``"digits"``).
            ValueError: unknown output.
        """
        _check_output(output)
        return self.target_vocab.index(TARGET_TAGS[output])

    def encode_source(self, words: str) -> list[int]:
        """Word ids of an English number, e.g. ``"three hundred twelve"``.

        Raises:
            TypeError: ``words`` is not a str (bytes: decode them first).
            ValueError: a word outside the vocabulary.
        """
        self._check_words(words)
        return [self.source_vocab.index(w) for w in words.split()]

    def _check_words(self, words: object) -> None:
        """TypeError unless ``words`` is a str; ValueError for a word outside the vocabulary."""
        check_text(words, "words")
        unknown = [w for w in words.split() if w not in self.source_vocab]
        if unknown:
            raise ValueError(f"unknown source words {unknown}; the task knows {self.source_vocab}")

    def target_text(self, n: int, output: str) -> str:
        """The reference output for ``n``: ``str(n)`` or :func:`number_to_chinese`.

        Raises:
            TypeError: ``n`` is not an int.
            ValueError: ``n`` outside ``[0, 999]``, or an unknown output.
        """
        n = _check_number(n)
        self.tag_id(output)
        return str(n) if output == "digits" else number_to_chinese(n)

    def decode_target(self, ids: list[int] | torch.Tensor) -> str:
        """Characters of target ids up to the first ``<eos>``, skipping tags and padding.

        Raises:
            TypeError: text or floats instead of ids.
            ValueError: not one sequence (a ``(1, T)`` batch: pass ``ids[0]``), or an id
                outside the target vocabulary.
        """
        ids = as_id_list(ids, len(self.target_vocab), "ids")
        text = []
        for i in ids:
            if i == self.eos_id:
                break
            if i != self.pad_id and self.target_vocab[i] not in TARGET_TAGS.values():
                text.append(self.target_vocab[i])
        return "".join(text)

    def batch(self, numbers: list[int], outputs: list[str]) -> dict[str, torch.Tensor]:
        """Padded tensors for pairs ``(numbers[i], outputs[i])``, ready for teacher forcing.

        Returns:
            ``{"src": (B, T_src), "tgt_in": (B, T_tgt), "tgt_out": (B, T_tgt)}``, int64,
            right-padded with 0. ``tgt_in`` is ``[tag, c_1 .. c_n]`` and ``tgt_out`` is
            ``[c_1 .. c_n, <eos>]``: the same sequence shifted by one, so position ``t``
            predicts the token after the ones it has seen.

        Raises:
            TypeError: ``numbers`` or ``outputs`` is not a list (one output name as a str:
                pass ``["digits"] * len(numbers)``); a number that is not an int.
            ValueError: the two lists differ in length or are empty; a bad number or output.
        """
        numbers = _check_list(numbers, "numbers", "[3, 312]")
        outputs = _check_list(outputs, "outputs", '["digits", "chinese"]')
        _check_pairs(numbers, outputs)
        sources, inputs, labels = [], [], []
        for n, output in zip(numbers, outputs):
            sources.append(self.encode_source(number_to_words(n)))
            chars = [self.target_vocab.index(c) for c in self.target_text(n, output)]
            inputs.append([self.tag_id(output), *chars])
            labels.append([*chars, self.eos_id])
        return {
            "src": _pad(sources),
            "tgt_in": _pad(inputs),
            "tgt_out": _pad(labels),
        }


def _check_pairs(numbers: list, outputs: list) -> None:
    """ValueError unless ``numbers`` and ``outputs`` are non-empty and equally long; each
    item checked under its own name (``numbers[i]``, ``outputs[i]``)."""
    if len(numbers) != len(outputs) or not numbers:
        raise ValueError(
            f"numbers and outputs must be non-empty and equally long, got {len(numbers)} "
            f"and {len(outputs)}"
        )
    for i, (n, output) in enumerate(zip(numbers, outputs)):
        _check_number(n, f"numbers[{i}]")
        _check_output(output, f"outputs[{i}]")


def _pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(rows), max(len(r) for r in rows), dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row)
    return out


def split_numbers(test_fraction: float = 0.2, seed: int = 0) -> tuple[list[int], list[int]]:
    """Shuffle ``0 .. 999`` with ``seed`` and hold out ``test_fraction`` of them.

    A held-out number is never seen in training, in either output, so test accuracy measures
    whether the model composes words it knows ("three", "hundred", "twelve") into a number it
    has not seen.

    Returns:
        ``(train_numbers, test_numbers)``, each sorted.

    Raises:
        TypeError: ``test_fraction`` is not a number, or ``seed`` is not an int.
        ValueError: ``test_fraction`` outside ``(0, 1)`` (a percentage such as 20 included).
    """
    test_fraction = check_float(
        test_fraction,
        "test_fraction",
        0.0,
        1.0,
        low_open=True,
        high_open=True,
        why="a share, e.g. 0.2 for 20%",
    )
    seed = check_int(seed, "seed")
    numbers = list(range(MAX_NUMBER + 1))
    random.Random(seed).shuffle(numbers)
    n_test = round(test_fraction * len(numbers))
    return sorted(numbers[n_test:]), sorted(numbers[:n_test])


def all_pairs(numbers: list[int]) -> tuple[list[int], list[str]]:
    """Every number twice, once per output: ``([n, n, ...], ["digits", "chinese", ...])``.

    Raises:
        TypeError: ``numbers`` is not a list.
    """
    numbers = _check_list(numbers, "numbers", "[3, 312]")
    return [n for n in numbers for _ in TARGET_TAGS], [o for _ in numbers for o in TARGET_TAGS]


def translate(model, task: NumberTask, numbers: list[int], outputs: list[str]) -> list[str]:
    """Greedy translations of ``numbers`` into ``outputs`` by an encoder–decoder ``model``.

    ``model`` needs ``greedy_decode(src, start, eos_id, max_new_tokens)``
    (:class:`course_utils.encoder_decoder.EncoderDecoder`); at most 6 characters are written
    (the longest output, e.g. 九百九十九, has 5, then ``<eos>``).

    Raises:
        TypeError: ``model`` has no ``greedy_decode`` (a decoder-only model), or ``task`` is
            not a NumberTask.
        ValueError: from :meth:`NumberTask.batch`.
    """
    _check_encoder_decoder(model)
    check_instance(task, "task", NumberTask, "build it with NumberTask.build()")
    batch = task.batch(numbers, outputs)
    start = torch.tensor([[task.tag_id(o)] for o in outputs])  # (B, 1): the target tag
    ids = model.greedy_decode(batch["src"], start, task.eos_id, max_new_tokens=6)
    return [task.decode_target(row) for row in ids]


def _check_encoder_decoder(model: object) -> None:
    """TypeError unless ``model`` has a ``greedy_decode`` (an encoder–decoder)."""
    if not callable(getattr(model, "greedy_decode", None)):
        raise TypeError(
            f"model must be an EncoderDecoder (it needs greedy_decode), got "
            f"{type(model).__name__}; build it with EncoderDecoder(EncoderDecoderConfig(...))"
        )


def exact_match(task: NumberTask, predictions: list[str], numbers: list[int], outputs: list[str]):
    """Fraction of predictions equal to the reference output, character for character.

    Raises:
        TypeError: an argument is not a list (e.g. one prediction as a str: wrap it, [text]).
        ValueError: the lists differ in length or are empty.
    """
    predictions = _check_list(predictions, "predictions", '["312", "三百一十二"]')
    numbers = _check_list(numbers, "numbers", "[312, 312]")
    outputs = _check_list(outputs, "outputs", '["digits", "chinese"]')
    _check_triples(predictions, numbers, outputs)
    _check_pairs(numbers, outputs)
    right = [p == task.target_text(n, o) for p, n, o in zip(predictions, numbers, outputs)]
    return sum(right) / len(right)


def _check_triples(predictions: list, numbers: list, outputs: list) -> None:
    """ValueError unless the three lists are non-empty and equally long."""
    if not len(predictions) == len(numbers) == len(outputs) or not predictions:
        raise ValueError(
            f"need as many predictions as numbers and outputs (> 0), got {len(predictions)}, "
            f"{len(numbers)}, {len(outputs)}"
        )
