"""Issue 42, item 8 and 7: the saved part follows the learner's notebook, and my_model judges as
the checkers do. A pass says where the part was saved (with the helpers it needs from other
cells); a part that fails afterwards is no longer called "yours"; a global that cannot be saved
is refused at once; my_model names why it swaps a part for the course's solution (a forward
difference, a gradient, randomness in train mode, an exception with its line). Also the
opt-in Google Drive folder for Colab (issue 41, item 8)."""

from __future__ import annotations

import linecache
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import course_utils.exercises.solution_model as solution
from course_utils.exercises import check_attention, check_feed_forward
from course_utils.lab import drive, parts


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(parts.FOLDER_ENV, str(tmp_path / "my_model"))
    return tmp_path / "my_model"


def cell(source: str, name: str, filename: str, namespace: dict | None = None):
    """Run ``source`` as a notebook cell would (in ``__main__``'s way: its lines in linecache,
    its globals one dict shared by the cells), return what it defines as ``name``."""
    namespace = {} if namespace is None else namespace
    namespace.setdefault("__name__", "__main__")
    namespace.update(torch=torch, nn=nn, F=F, math=__import__("math"))
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


ATTENTION = """
def attention(q, k, v, causal=True):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(future_mask(scores), float("-inf"))
    return scores.softmax(-1) @ v
"""

HELPER = """
def future_mask(scores):
    T_q, T_k = scores.shape[-2:]
    return torch.ones(T_q, T_k, dtype=torch.bool, device=scores.device).triu(1)
"""

WRONG_ATTENTION = """
def attention(q, k, v, causal=True):
    scores = q @ k.transpose(-2, -1)
    if causal:
        T_q, T_k = scores.shape[-2:]
        hidden = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return scores.softmax(-1) @ v
"""


def test_a_pass_says_where_the_part_was_saved_with_its_helper(folder, capsys):
    namespace: dict = {}
    cell(HELPER, "future_mask", "<cell-3>", namespace)
    attention = cell(ATTENTION, "attention", "<cell-4>", namespace)
    assert check_attention(attention) is True
    out = capsys.readouterr().out
    saved = folder / "attention.py"
    assert (
        out
        == f"✅ attention: correct (saved for my_parts and my_model as {saved}, with future_mask)\n"
    )
    assert "def future_mask(scores):" in saved.read_text()  # the helper travels with it
    split_heads, attend = parts.my_parts("split_heads", "attention")  # loads from the files
    q = torch.randn(2, 3, 5, 4)
    torch.testing.assert_close(attend(q, q, q), solution.attention(q, q, q))
    assert "attention (notebook 07): yours" in capsys.readouterr().out


def test_a_part_that_now_fails_is_no_longer_called_yours(folder, capsys):
    namespace: dict = {}
    cell(HELPER, "future_mask", "<cell-5>", namespace)
    assert check_attention(cell(ATTENTION, "attention", "<cell-6>", namespace))
    capsys.readouterr()
    assert not check_attention(cell(WRONG_ATTENTION, "attention", "<cell-7>", namespace))
    out = capsys.readouterr().out
    assert out.startswith("❌ attention: looks like no 1/sqrt(d_k) scale")
    kept = folder / "attention.py"
    assert (
        f"Until it passes, my_parts and my_model use your last attention that passed ({kept})"
        in out
    )
    parts.my_parts("attention")
    said = "your last version that passed (the one in your notebook fails its check)"
    assert f"attention (notebook 07): {said}" in capsys.readouterr().out
    assert check_attention(cell(ATTENTION, "attention", "<cell-8>", namespace))  # fixed again
    capsys.readouterr()
    parts.my_parts("attention")
    assert "attention (notebook 07): yours\n" in capsys.readouterr().out


def test_a_part_that_never_passed_leaves_the_course_s_solution_in_use(folder, capsys):
    assert not check_attention(cell(WRONG_ATTENTION, "attention", "<cell-9>"))
    assert (
        "Until it passes, my_parts and my_model use the course's attention"
        in capsys.readouterr().out
    )
    parts.my_parts("attention")
    out = capsys.readouterr().out
    assert (
        "attention (notebook 07): the course's solution (yours does not pass its check yet)" in out
    )
    stub = cell(
        "def attention(q, k, v, causal=True):\n    raise NotImplementedError\n",
        "attention",
        "<cell-10>",
    )
    assert not check_attention(stub)
    assert capsys.readouterr().out == "❌ attention: not implemented yet\n"  # no note: untouched


def test_a_global_that_cannot_be_saved_is_refused_at_once_with_its_name(folder, capsys):
    source = """
def attention(q, k, v, causal=True):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        T_q, T_k = scores.shape[-2:]
        hidden = torch.ones(T_q, T_k, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return softmax(scores) @ v
"""
    namespace = {"softmax": nn.Softmax(dim=-1)}  # a module built in another cell
    assert check_attention(cell(source, "attention", "<cell-11>", namespace)) is False
    out = capsys.readouterr().out
    assert "attention uses `softmax`, a Softmax from another cell of your notebook" in out
    assert not (folder / "attention.py").exists()


def test_plain_values_and_imports_are_saved_with_the_part(folder, capsys):
    source = """
def attention(q, k, v, causal=True):
    scores = q @ k.transpose(-2, -1) / sqrt(q.shape[-1])
    if causal:
        T = scores.shape[-1]
        hidden = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(hidden, NEG)
    return np_free(scores).softmax(-1) @ v
"""
    namespace = {"NEG": float("-inf"), "sqrt": __import__("math").sqrt, "np_free": torch.clone}
    assert check_attention(cell(source, "attention", "<cell-12>", namespace))
    saved = (folder / "attention.py").read_text()
    assert 'NEG = float("-inf")' in saved and "from math import sqrt" in saved
    assert "from torch import clone as np_free" in saved
    assert "with sqrt, NEG, np_free" in capsys.readouterr().out


# --- my_model judges as the checkers do ----------------------------------------------------


def write(folder, name: str, source: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(source.strip() + "\n")


DETACHED_NORM = """
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True).detach()
        var = x.var(-1, keepdim=True, unbiased=False).detach()
        return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias
"""

RANDOM_FEED_FORWARD = """
class FeedForward(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.up = nn.Linear(d_model, d_ff)
        self.down = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))
"""

RAISING_SPLIT = """
def split_heads(x, n_heads):
    B, T, C = x.shape
    return x.view(B, T, n_heads, C // n_heads).transpose(1, 2) + helper_not_defined
"""

SIZE_DEPENDENT_BLOCK = """
class Block(nn.Module):
    def __init__(self, d_model, n_heads, d_ff):
        super().__init__()
        self.ln_1 = LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.ln_2 = LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, d_ff)

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        out = x + self.feed_forward(self.ln_2(x))
        return out + 0.1 * out.pow(2) if x.shape[1] == 8 else out  # wrong at T = 8 only
"""


def test_my_model_names_why_it_swaps_each_part(folder, capsys):
    write(folder, "split_heads", RAISING_SPLIT)
    write(folder, "LayerNorm", DETACHED_NORM)
    write(folder, "FeedForward", RANDOM_FEED_FORWARD)
    module = parts.my_model()
    out = capsys.readouterr().out
    assert "split_heads         notebook 04: yours" in out
    said = {
        "split_heads": [
            "raised NameError: name 'helper_not_defined' is not defined",
            "`return x.view(B, T, n_heads, C // n_heads).transpose(1, 2) + helper_not_defined`",
        ],
        "LayerNorm": ["the gradient of x differs", "`mean = x.mean(-1, keepdim=True).detach()`"],
        "FeedForward": ["it is random in train mode", "self.dropout = Dropout(p=0.1)"],
    }
    for name, pieces in said.items():
        line = next(x for x in out.splitlines() if x.startswith(f"{name}: yours is replaced"))
        assert all(p in line for p in pieces), line
    assembled = (folder / "my_model.py").read_text()
    assert "helper_not_defined" not in assembled and ".detach()" not in assembled
    ids = torch.randint(0, 11, (2, 7))
    model = module.Decoder(11, 8, 24, 3, 2, 96)
    assert model(ids, ids)[1].requires_grad


def test_my_model_accepts_what_the_checker_accepts_and_rejects_the_same(folder, capsys):
    tanh = RANDOM_FEED_FORWARD.replace("self.dropout(", "(").replace(
        "F.gelu(self.up(x))", "F.gelu(self.up(x), approximate='tanh')"
    )
    namespace: dict = {}
    feed_forward = cell(tanh, "FeedForward", "<cell-13>", namespace)
    assert check_feed_forward(feed_forward) is False  # the checker names the tanh form ...
    assert "looks like GELU's tanh approximation" in capsys.readouterr().out
    write(folder, "FeedForward", tanh)
    parts.my_model()  # ... and so does the assembly, with the same words
    out = capsys.readouterr().out
    replaced = "FeedForward: yours is replaced by the course's solution in this model"
    assert f"{replaced}: looks like GELU's tanh" in out


def test_my_model_names_a_part_right_alone_but_wrong_inside_the_decoder(folder, capsys):
    write(folder, "Block", SIZE_DEPENDENT_BLOCK)
    parts.my_model()
    out = capsys.readouterr().out
    assert "Block: yours passes its own check but not inside the decoder" in out
    assert "on vocab_size=11, block_size=8" in out  # the decoder's case with T = 8


# --- Colab: the parts folder on Google Drive -------------------------------------------------


def test_keeping_parts_on_drive_does_nothing_outside_colab(folder, monkeypatch, capsys):
    monkeypatch.setattr(drive, "in_colab", lambda: False)
    assert parts.keep_parts_on_drive() is None
    assert (
        capsys.readouterr().out
        == f"Not in Colab: your parts are kept in {folder} on this machine.\n"
    )
    assert parts.parts_folder() == folder


def test_keeping_parts_on_drive_mounts_it_and_points_the_parts_there(tmp_path, monkeypatch, capsys):
    mounted = []
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=lambda where: mounted.append(where))
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(drive, "in_colab", lambda: True)
    monkeypatch.delenv(parts.FOLDER_ENV, raising=False)
    target = tmp_path / "drive" / "MyDrive" / "transformer_course" / "my_model"
    found = parts.keep_parts_on_drive(str(target), mount_point=str(tmp_path / "drive"))
    assert mounted == [str(tmp_path / "drive")] and found == target and target.is_dir()
    assert parts.parts_folder() == target
    assert capsys.readouterr().out == f"Your parts are kept on your Google Drive: {target}\n"
    (tmp_path / "drive" / "MyDrive").mkdir(exist_ok=True)  # mounted already: not again
    parts.keep_parts_on_drive(str(target), mount_point=str(tmp_path / "drive"))
    assert len(mounted) == 1


def _fake_colab(monkeypatch, tmp_path, mount):
    colab = types.ModuleType("google.colab")
    colab.drive = types.SimpleNamespace(mount=mount)
    monkeypatch.setitem(sys.modules, "google.colab", colab)
    monkeypatch.setattr(drive, "in_colab", lambda: True)
    monkeypatch.delenv(parts.FOLDER_ENV, raising=False)
    monkeypatch.setattr(drive, "MOUNT_POINT", str(tmp_path / "drive"))
    target = tmp_path / "drive" / "MyDrive" / "transformer_course" / "my_model"
    monkeypatch.setattr(drive, "DRIVE_FOLDER", str(target))
    return target


def test_in_colab_the_first_use_of_the_parts_folder_puts_it_on_the_drive(
    tmp_path, monkeypatch, capsys
):
    """A Colab notebook is a new machine: without a call of the learner's, the parts folder is
    on their Drive from the first part saved or read, and the Drive is mounted once."""
    mounted = []
    target = _fake_colab(monkeypatch, tmp_path, lambda where: mounted.append(where))
    assert parts.parts_folder() == target and parts.parts_folder() == target
    assert mounted == [str(tmp_path / "drive")]
    assert capsys.readouterr().out == f"Your parts are kept on your Google Drive: {target}\n"


def test_in_colab_a_declined_drive_keeps_the_parts_on_the_machine_and_says_so(
    tmp_path, monkeypatch, capsys
):
    def decline(where):
        raise ValueError("mount failed: the user declined")

    _fake_colab(monkeypatch, tmp_path, decline)
    monkeypatch.chdir(tmp_path)
    assert parts.parts_folder() == tmp_path / "my_model"
    out = capsys.readouterr().out
    assert "kept on this Colab machine only" in out and "the user declined" in out
    assert "run keep_parts_on_drive() to try the Drive again" in out
    assert parts.parts_folder() == tmp_path / "my_model" and capsys.readouterr().out == ""


def test_a_solution_cell_with_its_words_translated_is_still_the_courses():
    """The Chinese edition's solution cells translate comments and messages: the checker
    still knows them as the course's solution, and saves nothing as the learner's part; a
    change of code is not a translation."""
    from course_utils.exercises.keeping import _is_solution

    english = parts.solution_source("FeedForward")
    chinese = english.replace(
        "# (B, T, C) -> (B, T, d_ff) -> (B, T, C)", "# 形状：(B, T, C) -> (B, T, C)"
    )
    assert chinese != english and _is_solution("FeedForward", chinese)
    assert not _is_solution("FeedForward", chinese.replace("F.gelu", "F.relu"))
    assert not _is_solution("FeedForward", "def FeedForward(:")  # does not parse: not it
