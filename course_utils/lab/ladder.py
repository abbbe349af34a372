"""The loss ladder: what each part of the decoder buys, one validation loss per part.

From notebook 00 to 12 the learner's model grows a part at a time (a bigram table; an
embedding; + one self-attention head; + heads; + the residual path and LayerNorm; + the
feed-forward network; the blocks stacked; the full run). Each notebook that adds a part
trains its model-so-far for a few seconds with :func:`train_briefly`, always with the same
budget and data, and draws the running figure with :func:`show_ladder`: the rungs of the
earlier notebooks, as ``make course`` last measured them (``assets/ladder/<key>.json``), and
this notebook's rung, measured live. Karpathy's lecture keeps a part because the validation
loss falls; the ladder shows the same thing across notebooks.

The budget is fixed (:data:`LADDER`): Shakespeare's characters split as in notebook 12,
windows of ``block_size`` 16, batches of 32, AdamW for 600 steps at a learning rate that rises
linearly over the first 100 steps to 1e-2 and falls to 1e-3 along a half cosine (a warm-up: without
it the two-block rung of notebook 11 varies from seed to seed by more than its block buys), on the
CPU (a GPU would change the numbers in the last
digits, and the rungs must be comparable), and the validation loss is the mean cross-entropy
(nats per character) over 1024 fixed validation windows. Each rung also prints a few lines its
model writes (:func:`sample_text`), so the learner watches the text improve rung by rung.

When a learner runs a rung, its value is also kept beside their parts
(``<parts folder>/ladder.json``): the next notebook's "rung before" is then theirs, not the
course's.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F
from torch import nn

from course_utils.checks import check_instance, check_int
from course_utils.data import get_batch
from course_utils.lab.corpora import CorpusData, corpus_data
from course_utils.lab.language import N_, tr, translated
from course_utils.lab.parts import parts_folder
from course_utils.tokenization import CharTokenizer

LADDER_DIR = Path(__file__).resolve().parents[2] / "assets" / "ladder"
#: Set to 1 by ``make course``: :func:`show_ladder` then writes this notebook's rung.
WRITE_ENV = "COURSE_WRITE_LADDER"
#: Set to 1 by ``make test`` (strict nbval): :func:`show_ladder` then holds a rung trained at
#: the ladder's budget to its committed value, within :data:`RUNG_TOLERANCE`. The notebooks
#: print the rung to 3 decimals, whose last one varies with the CPU's floating-point kernels and
#: the torch version, so nbval ignores that output; this check catches a rung that moved.
CHECK_ENV = "COURSE_CHECK_LADDER"
RUNG_TOLERANCE = 0.03  # nats/char; the H100 machine's CPU (torch 2.11) differed in the 3rd decimal
#: The rung names the notebooks pass (``assets/ladder/*.json`` records them), marked for the
#: catalogue: a name is shown through :func:`translated` (one missing here, as it is).
RUNG_NAMES = (
    N_("bigram table"),
    N_("token embedding (d_model=24), linear head"),
    N_("+ one self-attention head"),
    N_("+ heads"),
    N_("+ residual path and LayerNorm"),
    N_("+ feed-forward network"),
    N_("+ a second block"),
    N_("the whole decoder, full run"),
)


@dataclass(frozen=True)
class LadderBudget:
    """The one training budget every rung gets (see the module docstring)."""

    block_size: int = 16
    batch_size: int = 32
    steps: int = 600
    lr: float = 1e-2
    min_lr: float = 1e-3  # the half cosine's end
    warmup: int = 100  # steps of the linear rise to lr
    val_windows: int = 1024
    seed: int = 0


LADDER = LadderBudget()


@dataclass(frozen=True)
class LadderData:
    """What a notebook needs to size its model-so-far: the tokenizer, the two splits (1-D int64
    token ids), ``vocab_size`` and the ladder's ``block_size``."""

    tokenizer: CharTokenizer
    train: torch.Tensor
    val: torch.Tensor
    vocab_size: int
    block_size: int


@lru_cache(maxsize=1)
def ladder_data() -> LadderData:
    """Shakespeare's characters, encoded and split 90 / 10 as in notebook 12 (cached)."""
    data = corpus_data("shakespeare")
    return LadderData(data.tokenizer, data.train, data.val, data.vocab_size, LADDER.block_size)


def train_briefly(model: nn.Module, *, steps: int | None = None, seed: int = LADDER.seed) -> float:
    """Train ``model`` with the ladder's budget on the CPU and return its validation loss.

    Args:
        model: maps ids ``(B, T)`` int64 to logits ``(B, T, V)``, or to ``(logits, loss)``
            (the first element is used; the loss is recomputed here).
        steps: optimizer steps; default ``LADDER.steps`` (600). Rungs use the default.
        seed: seeds the training windows (the model's initial weights are the caller's).

    Returns:
        The mean cross-entropy in nats per character over ``LADDER.val_windows`` fixed
        validation windows, after training. The model is left trained, in eval mode, on the CPU.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``; steps or seed not an int.
        ValueError: ``steps < 1``; logits of the wrong shape (the message gives both shapes).
    """
    check_instance(model, "model", nn.Module, "pass the model itself, e.g. train_briefly(model)")
    steps = check_int(LADDER.steps if steps is None else steps, "steps", minimum=1)
    seed = check_int(seed, "seed")
    data = ladder_data()
    model.to("cpu").train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LADDER.lr)
    generator = torch.Generator().manual_seed(seed)
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = ladder_lr(step, steps)
        x, y = get_batch(data.train, LADDER.block_size, LADDER.batch_size, generator)
        loss = _loss(model, x, y, data.vocab_size)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return validation_loss(model)


def ladder_lr(step: int, steps: int) -> float:
    """The ladder's learning rate at ``step`` (0-based) of ``steps``: ``LADDER.lr * (step + 1) /
    LADDER.warmup`` for the first ``LADDER.warmup`` steps, then the half cosine from
    ``LADDER.lr`` (at step 0) to ``LADDER.min_lr`` (at ``steps``) that the warm-up cut short."""
    if step < LADDER.warmup:
        return LADDER.lr * (step + 1) / LADDER.warmup
    cosine = 0.5 * (1 + math.cos(math.pi * step / steps))
    return LADDER.min_lr + (LADDER.lr - LADDER.min_lr) * cosine


@torch.no_grad()
def sample_text(model: nn.Module, n_chars: int = 160, seed: int = 0) -> str:
    """``n_chars`` characters that ``model`` writes after a line break, sampled from its softmax
    with a seeded generator (the context is cropped to the ladder's ``block_size``).

    Raises:
        TypeError: ``model`` is not an ``nn.Module``; ``n_chars`` or ``seed`` not an int.
        ValueError: ``n_chars < 1``; logits of the wrong shape.
    """
    check_instance(model, "model", nn.Module, "pass the model itself, e.g. sample_text(model)")
    n_chars = check_int(n_chars, "n_chars", minimum=1)
    seed = check_int(seed, "seed")
    data = ladder_data()
    model.eval()
    generator = torch.Generator().manual_seed(seed)
    ids = torch.tensor([data.tokenizer.encode("\n")])  # (1, 1)
    for _ in range(n_chars):
        out = model(ids[:, -LADDER.block_size :])
        logits = out[0] if isinstance(out, tuple) else out
        _check_logits(logits, ids[:, -LADDER.block_size :], data.vocab_size)
        probs = torch.softmax(logits[0, -1].float(), dim=-1)  # (V,)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=generator)[None]], dim=1)
    return data.tokenizer.decode(ids[0, 1:].tolist())


@torch.no_grad()
def validation_loss(model: nn.Module) -> float:
    """The ladder's validation loss of ``model`` (nats per character), in eval mode."""
    data = ladder_data()
    model.eval()
    generator = torch.Generator().manual_seed(1234)  # the same windows for every rung
    x, y = get_batch(data.val, LADDER.block_size, LADDER.val_windows, generator)
    return _loss(model, x, y, data.vocab_size).item()


def _loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, vocab_size: int) -> torch.Tensor:
    out = model(x)
    logits = out[0] if isinstance(out, tuple) else out
    _check_logits(logits, x, vocab_size)
    return F.cross_entropy(logits.reshape(-1, vocab_size).float(), y.reshape(-1))


def _check_logits(logits: object, x: torch.Tensor, vocab_size: int) -> None:
    expected = (*x.shape, vocab_size)
    if not isinstance(logits, torch.Tensor) or tuple(logits.shape) != expected:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"the model's forward(ids) must return logits of shape (B, T, vocab_size) = "
            f"{expected} (or a tuple starting with them), got {got}; check the LM head's "
            "output width and that forward returns the logits"
        )


def recorded_rungs() -> dict[str, dict]:
    """Every committed rung, ``{key: {"label", "val_loss", ...}}``, in key order (the files
    ``NN-name.json``; the experiments' records beside them are not rungs)."""
    rungs = {}
    for path in sorted(LADDER_DIR.glob("[0-9][0-9]-*.json")):
        rungs[path.stem] = json.loads(path.read_text(encoding="utf-8"))
    return rungs


def show_ladder(
    key: str,
    label: str,
    val_loss: float,
    *,
    same_budget: bool = True,
    model: nn.Module | None = None,
    corpus: str = "shakespeare",
) -> plt.Figure:
    """Print this notebook's rung (and a few lines its model writes) and draw the ladder.

    Args:
        key: ``"NN-name"``, NN the notebook that adds the part (e.g. ``"07-one-head"``);
            rungs are drawn in key order, those after ``key`` are left out.
        label: what the part adds, e.g. ``"+ one self-attention head"``.
        val_loss: this rung's validation loss, from :func:`train_briefly` (or a longer run).
        same_budget: False for a rung trained longer than :data:`LADDER` (notebook 12's full
            run); the comparison with the rung before then says so.
        model: the rung's trained model; when given, :func:`sample_text` prints what it writes.
        corpus: the text ``val_loss`` was measured on (:data:`course_utils.lab.corpora.CORPORA`).
            The rungs read Shakespeare; a loss on another text (the Chinese edition's Tang
            poems, notebook 12) is on another scale: it is printed beside its ln V, the ladder
            is drawn without it, and nothing is kept or checked.

    The earlier rungs are the learner's own where they ran them (kept in the parts folder by
    this function), else the course's committed values; the printed line says whose.

    Returns:
        The figure (also shown inline).

    Raises:
        TypeError / ValueError: a key or label that is not a str, a key not of the form
            ``"NN-name"``, a val_loss that is not a finite number, or an unknown corpus.
        AssertionError: with ``COURSE_CHECK_LADDER=1`` (make test), a rung at the ladder's
            budget more than :data:`RUNG_TOLERANCE` from its committed value.
    """
    key, label, val_loss = _check_rung(key, label, val_loss)
    rungs = {k: r for k, r in recorded_rungs().items() if k < key}
    # The course's own runs (make course, make test) show and keep the course's rungs only.
    course_run = "1" in (os.environ.get(WRITE_ENV), os.environ.get(CHECK_ENV))
    yours = {} if course_run else {k: r for k, r in learner_rungs().items() if k < key}
    rungs.update(yours)
    if corpus != "shakespeare":  # corpus_data names an unknown one
        return _another_corpus(rungs, label, val_loss, corpus_data(corpus))
    rungs[key] = {"label": label, "val_loss": val_loss}
    if os.environ.get(WRITE_ENV) == "1":
        _write_rung(LADDER_DIR, key, label, val_loss)
    elif os.environ.get(CHECK_ENV) == "1" and same_budget:
        _check_against_committed(key, val_loss)
    if not course_run:
        _keep_learner_rung(key, label, val_loss)
    print(
        tr("{label}: validation loss {loss:.3f} nats/char (ln V = {ln_v:.3f})").format(
            label=translated(label), loss=val_loss, ln_v=_ln_vocab()
        )
    )
    earlier = [k for k in rungs if k < key]
    if earlier:
        print(_rung_before(earlier[-1], rungs[earlier[-1]], earlier[-1] in yours, val_loss,
                           same_budget))  # fmt: skip
    if model is not None:
        lines = sample_text(model).splitlines()[:3]
        print(tr("it writes:") + "\n" + "\n".join(f"    {line}" for line in lines))
    return _draw(rungs, key)


def _rung_before(key: str, before: dict, yours: bool, val_loss: float, same_budget: bool) -> str:
    """The line comparing this rung with the one before (``key``), in whole clauses."""
    whose = tr("your run") if yours else tr("the course's run")
    change = round(val_loss, 3) - round(before["val_loss"], 3)  # the printed values' difference
    if same_budget:
        if change <= 0:
            comparison = tr("this model is {change:.3f} lower with the same budget")
        else:
            comparison = tr("this model is {change:.3f} higher with the same budget")
    elif change <= 0:
        comparison = tr("this model is {change:.3f} lower after a longer run than the ladder's")
    else:
        comparison = tr("this model is {change:.3f} higher after a longer run than the ladder's")
    return tr("the rung before ({notebook}, {label}, {whose}): {loss:.3f}; {comparison}").format(
        notebook=key[:2],
        label=translated(before["label"]),
        whose=whose,
        loss=before["val_loss"],
        comparison=comparison.format(change=abs(change)),
    )


def _another_corpus(rungs: dict, label: str, val_loss: float, data: CorpusData) -> plt.Figure:
    """The rung of a run on another text than the ladder's: printed, not drawn among them."""
    print(
        tr(
            "{label}: validation loss {loss:.3f} nats/char on {corpus} "
            "(ln V = {ln_v:.3f}, V = {vocab_size:,})"
        ).format(
            label=translated(label),
            loss=val_loss,
            corpus=data.corpus,
            ln_v=math.log(data.vocab_size),
            vocab_size=data.vocab_size,
        )
    )
    print(
        tr(
            "the ladder's rungs read Shakespeare (ln V = {ln_v:.3f}): a loss on another text "
            "is on another scale, so this run is not drawn among them"
        ).format(ln_v=_ln_vocab())
    )
    return _draw(rungs, current="")


def learner_rungs() -> dict[str, dict]:
    """The rungs the learner ran, ``{key: {"label", "val_loss", ...}}`` (parts folder)."""
    rungs = {}
    for path in sorted((parts_folder() / "ladder").glob("*.json")):
        try:
            rungs[path.stem] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # a half-written or unreadable file: the course's value stands in
    return rungs


def _keep_learner_rung(key: str, label: str, val_loss: float) -> None:
    try:
        _write_rung(parts_folder() / "ladder", key, label, val_loss)
    except OSError as error:  # a read-only folder: the rung is shown, not kept
        print(tr("(your rung was not kept for the next notebook: {error})").format(error=error))


def _check_rung(key: object, label: object, val_loss: object) -> tuple[str, str, float]:
    if not isinstance(key, str) or len(key) < 4 or not key[:2].isdigit() or key[2] != "-":
        raise ValueError(f"key must be 'NN-name' (e.g. '07-one-head'), got {key!r}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {type(label).__name__}")
    if isinstance(val_loss, bool) or not isinstance(val_loss, (int, float)):
        raise TypeError(f"val_loss must be a number (a float), got {type(val_loss).__name__}")
    if not math.isfinite(val_loss):
        raise ValueError(f"val_loss must be finite, got {val_loss}; did training diverge?")
    return key, label, float(val_loss)


def _check_against_committed(key: str, val_loss: float) -> None:
    committed = recorded_rungs().get(key)
    if committed is None:
        raise AssertionError(
            f"rung {key!r} has no committed value in {LADDER_DIR}: run make course"
        )
    if abs(val_loss - committed["val_loss"]) > RUNG_TOLERANCE:
        raise AssertionError(
            f"rung {key!r}: live validation loss {val_loss:.4f}, committed "
            f"{committed['val_loss']:.4f}, more than {RUNG_TOLERANCE} apart: the model or the "
            "budget changed; run make course to re-execute the notebooks and rewrite the rungs"
        )


def _write_rung(folder: Path, key: str, label: str, val_loss: float) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"label": label, "val_loss": round(val_loss, 6), "notebook": key[:2]}
    (folder / f"{key}.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _ln_vocab() -> float:
    return math.log(ladder_data().vocab_size)


def _draw(rungs: dict[str, dict], current: str) -> plt.Figure:
    """A dot per rung (lower is better), this notebook's in orange. With one rung the axis
    reaches ln V (dashed) for scale; with more it spans the rungs, so that their differences
    show, and ln V is named in the axis label."""
    keys = list(rungs)
    losses = [rungs[k]["val_loss"] for k in keys]
    fig, ax = plt.subplots(figsize=(9, 0.42 * len(keys) + 1.5))
    for i, (key, loss) in enumerate(zip(keys, losses)):
        color = "tab:orange" if key == current else "tab:blue"
        ax.plot([loss], [i], "o", color=color, markersize=9)
        ax.text(loss, i - 0.3, f"{loss:.3f}", ha="center", fontsize=9, color=color)
    ax.plot(losses, range(len(keys)), color="lightgray", zorder=0)
    ax.set_yticks(range(len(keys)), [f"{k[:2]}  {translated(rungs[k]['label'])}" for k in keys])
    ax.set_ylim(len(keys) - 0.5, -0.8)
    if len(keys) == 1:
        ax.axvline(_ln_vocab(), color="gray", linestyle="--", linewidth=1)
        ax.text(_ln_vocab(), len(keys) - 0.6, tr("ln V: a uniform guess "), color="gray",
                fontsize=9, ha="right")  # fmt: skip
        ax.set_xlim(min(losses) - 0.25, _ln_vocab() + 0.1)
    else:
        pad = max(0.05, 0.12 * (max(losses) - min(losses)))
        ax.set_xlim(min(losses) - pad, max(losses) + pad)
    ax.set_xlabel(
        tr("validation loss (nats/char), lower is better; uniform guess: ln V = {ln_v:.2f}").format(
            ln_v=_ln_vocab()
        )
    )
    if current in rungs:
        ax.set_title(tr("The loss ladder (orange: this notebook, measured now)"))
    else:
        ax.set_title(tr("The loss ladder (on Shakespeare)"))
    fig.tight_layout()
    plt.show()
    return fig
