"""The learner's trained decoder, kept beside their parts so that notebook 13 goes on with it.

Notebook 12 trains ``m.Decoder(V, block_size, d_model, n_heads, n_layers, d_ff)`` (``m`` the
learner's parts in one file, :func:`course_utils.lab.parts.my_model`) and saves, in a cell the
learner reads (what :func:`keep_trained` saves, without its checks), the weights, the
constructor's arguments and the tokenizer's characters to ``<parts folder>/trained_decoder.pt``
(the folder of ``m.__file__``), beside the parts (on the learner's Google Drive
in Colab, where :func:`course_utils.lab.parts.keep_parts_on_drive` points the parts folder,
so the next notebook, a new machine, finds it). :func:`load_trained` rebuilds the model from
the learner's parts as they are now, with those weights; with ``untrained_seed`` it gives,
when nothing was kept, the same decoder at the ``cpu`` size, untrained, from that seed.

The file holds only tensors, ints and strings, so it loads with ``torch.load(...,
weights_only=True)``.
"""

from __future__ import annotations

import os
import types
from pathlib import Path
from typing import NamedTuple

import torch
from torch import nn

from course_utils.checks import check_instance, check_int
from course_utils.config import get_config
from course_utils.exercises.keeping import parts_folder
from course_utils.lab.language import N_, tr, translated
from course_utils.tokenization import CharTokenizer

__all__ = ["ARGUMENTS", "FILE_NAME", "Trained", "keep_trained", "load_trained", "trained_path"]

FILE_NAME = "trained_decoder.pt"
#: The learner's ``Decoder(...)`` arguments, in the order of the exercise of notebook 11.
ARGUMENTS = ("vocab_size", "block_size", "d_model", "n_heads", "n_layers", "d_ff")
UNTRAINED_LINE = N_(
    "run notebook 12 first to use your trained decoder; an untrained one shows the cache just "
    "as well: its text is noise"
)


class Trained(NamedTuple):
    """What :func:`load_trained` gives: the decoder in eval mode on the CPU, the character
    tokenizer it was trained with, its constructor's arguments (:data:`ARGUMENTS`), the
    learner's parts module it was built from, and whether its weights are trained."""

    model: nn.Module
    tokenizer: CharTokenizer
    arguments: dict[str, int]
    module: types.ModuleType
    trained: bool


def trained_path() -> Path:
    """Where the trained decoder is kept: ``<parts folder>/trained_decoder.pt``."""
    return parts_folder() / FILE_NAME


def keep_trained(
    model: nn.Module,
    tokenizer: CharTokenizer,
    block_size: int,
    d_model: int,
    n_heads: int,
    n_layers: int,
    d_ff: int,
) -> Path:
    """Keep the learner's trained decoder beside their parts, with what rebuilds it.

    Saves ``{"arguments", "vocabulary", "state_dict"}`` (the weights moved to the CPU) to
    :func:`trained_path`, replacing an earlier one in one step, and prints where.

    Args:
        model: the trained ``m.Decoder(len(tokenizer.vocab), block_size, d_model, n_heads,
            n_layers, d_ff)``, on any device.
        tokenizer: the :class:`CharTokenizer` it was trained with; its characters are kept.
        block_size, d_model, n_heads, n_layers, d_ff: the other constructor arguments, ints >= 1.

    Returns:
        The path of the file.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``; ``tokenizer`` is not a
            :class:`CharTokenizer`; a size that is not an int.
        ValueError: a size < 1; a model whose token embedding does not have one row per
            character of the tokenizer.
    """
    check_instance(
        model, "model", nn.Module, "pass the trained decoder, e.g. keep_trained(model, ...)"
    )
    check_instance(
        tokenizer, "tokenizer", CharTokenizer, "pass the tokenizer the model was trained with"
    )
    sizes = dict(
        block_size=block_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff
    )
    arguments = {"vocab_size": len(tokenizer.vocab)}
    arguments |= {name: check_int(value, name, minimum=1) for name, value in sizes.items()}
    rows = getattr(getattr(model, "token_embedding", None), "num_embeddings", None)
    if rows is not None and rows != arguments["vocab_size"]:
        raise ValueError(
            f"model's token_embedding has {rows} rows but tokenizer has "
            f"{arguments['vocab_size']} characters; pass the tokenizer the model was built with"
        )
    state = {name: tensor.detach().cpu() for name, tensor in model.state_dict().items()}
    payload = {"arguments": arguments, "vocabulary": list(tokenizer.vocab), "state_dict": state}
    path = trained_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    torch.save(payload, partial)
    os.replace(partial, path)  # a run stopped while saving leaves the earlier file whole
    print(
        tr("Your trained decoder is kept in {path}: notebook 13 goes on with it.").format(path=path)
    )
    return path


def load_trained(
    module: types.ModuleType | None = None, *, untrained_seed: int | None = None
) -> Trained | None:
    """The learner's decoder kept by :func:`keep_trained`, rebuilt from their parts.

    Args:
        module: the learner's parts in one file (``my_model()``); default: assembled here.
        untrained_seed: when nothing is kept (or the kept weights no longer fit the parts),
            return the same ``Decoder`` at the ``cpu`` size (:data:`course_utils.config.PRESETS`)
            and Shakespeare's characters, untrained, its weights drawn after
            ``torch.manual_seed(untrained_seed)``, and say so in one line; default: None.

    Returns:
        A :class:`Trained` (the model in eval mode on the CPU), or None when nothing usable is
        kept and ``untrained_seed`` is None. A kept file that cannot be used is named in one
        line, with the fix.

    Raises:
        TypeError: ``module`` without a ``Decoder``; ``untrained_seed`` not an int.
    """
    if untrained_seed is not None:
        untrained_seed = check_int(untrained_seed, "untrained_seed")
    if module is None:
        from course_utils.lab.parts import my_model

        module = my_model()
    if not isinstance(getattr(module, "Decoder", None), type):
        raise TypeError(
            f"module must be the learner's parts with a Decoder class (my_model()), got {module!r}"
        )
    kept = _rebuild(module)
    if kept is None and untrained_seed is not None:
        print(translated(UNTRAINED_LINE))
        return _untrained(module, untrained_seed)
    return kept


def _rebuild(module: types.ModuleType) -> Trained | None:
    path = trained_path()
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        arguments = {name: int(payload["arguments"][name]) for name in ARGUMENTS}
        tokenizer = CharTokenizer(payload["vocabulary"])
        with torch.random.fork_rng():
            model = module.Decoder(*(arguments[name] for name in ARGUMENTS))
        model.load_state_dict(payload["state_dict"])
    except Exception as error:  # an old, partial or foreign file, or parts changed since
        print(
            tr(
                "The decoder kept in {path} cannot be used ({kind}: {error}); "
                "run notebook 12 again to keep a new one."
            ).format(path=path, kind=type(error).__name__, error=error)
        )
        return None
    print(
        tr("Your trained decoder, from {path}: {sizes}.").format(path=path, sizes=_sizes(arguments))
    )
    return Trained(model.eval(), tokenizer, arguments, module, True)


def _untrained(module: types.ModuleType, seed: int) -> Trained:
    from course_utils.lab.ladder import ladder_data

    tokenizer = ladder_data().tokenizer
    config, _ = get_config("cpu", len(tokenizer.vocab))
    arguments = {name: getattr(config, name) for name in ARGUMENTS}
    torch.manual_seed(seed)
    model = module.Decoder(*(arguments[name] for name in ARGUMENTS))
    return Trained(model.eval(), tokenizer, arguments, module, False)


def _sizes(arguments: dict[str, int]) -> str:
    return ", ".join(f"{name} {value}" for name, value in arguments.items())
