"""The words of a notebook, as the translation catalogues see them (no catalogue library here).

A notebook's translatable texts are:

- each markdown cell, whole;
- in a code cell, each comment (a run of whole-line comments at one indentation is one text;
  a comment after code is one text) and each string literal in a text position that holds
  English words: an argument of ``print``, of a figure label (``set_title``, ``set_xlabel``,
  ``suptitle``...), of an exception (``...Error(...)``), a ``label=``/``title=``/``xlabel=``/
  ``ylabel=`` keyword, or a docstring; and the ``corpus=`` keyword, the one choice an edition
  makes in code (notebook 12's ``corpus_data(corpus="shakespeare")``: the Chinese edition's
  catalogue says ``"tang_poems"``); and the ``language=`` keyword of the setup cell's
  ``setup(language="en")``, which the Chinese catalogues translate to ``"zh"``. The literal
  is taken whole, quotes and ``f`` prefix
  included, so an f-string's ``{...}`` fields travel with it.

Everything else in a code cell is code and is never translated. :func:`code_skeleton` is the
code with comments and the text-position literals set aside (an f-string keeps its fields, in
any order): two code cells that differ only in their words have the same skeleton, whatever
language the words are in. Markers (``# NBVAL_...``, ``# noqa``, ``# fmt:``, ``# type:``) are
code, not text. Lines starting with ``%`` or ``!`` (IPython magics) are read as blank lines.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass

TEXT_CALLS = frozenset(
    {"print", "set_title", "set_xlabel", "set_ylabel", "suptitle", "title", "xlabel", "ylabel",
     "text", "annotate", "figtext"}
)  # fmt: skip
TEXT_KEYWORDS = frozenset({"label", "title", "xlabel", "ylabel", "corpus", "language"})
MARKERS = re.compile(r"#\s*(NBVAL_|noqa|fmt:|type:|pragma)")
WORDS = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True, order=True)
class Span:
    """A text inside a code cell: ``source[start:end]`` (character offsets), its kind
    (``"comment"`` or ``"string"``) and, for a comment run, its indentation column."""

    start: int
    end: int
    kind: str
    column: int = 0


def _parsable(source: str) -> str:
    """``source`` with IPython magic lines blanked (same lines, same offsets elsewhere)."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def _line_starts(source: str) -> list[int]:
    starts, total = [0], 0
    for line in source.split("\n"):
        total += len(line) + 1
        starts.append(total)
    return starts


def _comment_spans(source: str) -> list[Span]:
    """Comment runs (whole-line comments on consecutive lines at one column) and end-of-line
    comments, markers left out."""
    starts, lines = _line_starts(source), source.split("\n")
    tokens = tokenize.generate_tokens(io.StringIO(_parsable(source)).readline)
    spans: list[Span] = []
    last_row = None
    for token in tokens:
        if token.type != tokenize.COMMENT or MARKERS.match(token.string):
            continue
        (row, col), (_, end_col) = token.start, token.end
        whole_line = not lines[row - 1][:col].strip()
        start, end = starts[row - 1] + col, starts[row - 1] + end_col
        previous = spans[-1] if spans else None
        if whole_line and previous and previous.column == col and last_row == row - 1:
            spans[-1] = Span(previous.start, end, "comment", col)
        else:
            spans.append(Span(start, end, "comment", col if whole_line else -1))
        last_row = row if whole_line else None
    return spans


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _is_literal(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def text_literals(tree: ast.AST) -> list[ast.expr]:
    """The string literals of ``tree`` in text positions, whatever their language."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _callee(node)
            if name in TEXT_CALLS or name.endswith("Error"):
                found += [arg for arg in node.args if _is_literal(arg)]
            found += [k.value for k in node.keywords if k.arg in TEXT_KEYWORDS]
        elif isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr):
                found.append(first.value)
    return [node for node in found if _is_literal(node)]


def _has_words(node: ast.expr) -> bool:
    parts = node.values if isinstance(node, ast.JoinedStr) else [node]
    return any(isinstance(p, ast.Constant) and WORDS.search(str(p.value)) for p in parts)


def _string_spans(source: str) -> list[Span]:
    """The text-position literals that hold English words; one inside another is left out."""
    starts = _line_starts(source)
    lines = source.split("\n")

    def offset(row: int, byte_col: int) -> int:  # ast counts UTF-8 bytes within a line
        return starts[row - 1] + len(lines[row - 1].encode()[:byte_col].decode())

    tree = ast.parse(_parsable(source))
    spans = sorted(
        Span(offset(n.lineno, n.col_offset), offset(n.end_lineno, n.end_col_offset), "string")
        for n in text_literals(tree)
        if _has_words(n)
    )
    outer = [s for s in spans if not any(o != s and o.start <= s.start < o.end for o in spans)]
    return sorted(set(outer))


def code_spans(source: str) -> list[Span]:
    """Every translatable text of a code cell's ``source``, in order.

    Raises:
        SyntaxError: the cell is not Python (magics aside).
    """
    return sorted(_comment_spans(source) + _string_spans(source), key=lambda s: s.start)


def span_text(source: str, span: Span) -> str:
    """The text a catalogue holds for ``span``: a comment run's lines without indentation."""
    text = source[span.start : span.end]
    if span.kind == "comment":
        return "\n".join(line.strip() for line in text.split("\n"))
    return text


def check_translation(span: Span, msgid: str, msgstr: str) -> None:
    """ValueError unless ``msgstr`` can stand where ``msgid`` stood: a comment's lines all
    start with ``#`` (an end-of-line comment stays one line); a string is one literal."""
    if span.kind == "comment":
        lines = msgstr.split("\n")
        if not all(line.lstrip().startswith("#") for line in lines) or (
            span.column < 0 and len(lines) > 1
        ):
            raise ValueError(
                f"the translation {msgstr!r} of the comment {msgid!r} must be comment lines "
                "each starting with '#' (an end-of-line comment: one line); fix the catalogue"
            )
        return
    try:
        # in parentheses, as in the call it stands in: a literal may wrap over lines
        node = ast.parse("(" + msgstr.strip() + ")", mode="eval").body
    except SyntaxError:
        node = None
    if node is None or not _is_literal(node):
        raise ValueError(
            f"the translation {msgstr!r} of the string {msgid!r} must be one string literal "
            "with its quotes (and the same {fields} for an f-string); fix the catalogue"
        )


def replace_texts(source: str, translate: dict[str, str]) -> str:
    """``source`` with each text found in ``translate`` (a catalogue's msgid -> msgstr)
    replaced; a comment run is re-indented to its column.

    Raises:
        ValueError: a translation cannot stand in the code (see :func:`check_translation`).
    """
    pieces, last = [], 0
    for span in code_spans(source) if translate else []:
        msgid = span_text(source, span)
        if msgid not in translate:
            continue
        msgstr = translate[msgid].strip()
        check_translation(span, msgid, msgstr)
        if span.kind == "comment" and span.column >= 0:
            msgstr = ("\n" + " " * span.column).join(line.strip() for line in msgstr.split("\n"))
        pieces += [source[last : span.start], msgstr]
        last = span.end
    return "".join(pieces) + source[last:]


class _Skeleton(ast.NodeTransformer):
    """Text-position literals become ``("<text>", *fields)``, fields sorted."""

    def __init__(self, texts: list[ast.expr]):
        self.texts = {id(node) for node in texts}

    def visit(self, node: ast.AST) -> ast.AST:
        if id(node) in self.texts:
            fields = node.values if isinstance(node, ast.JoinedStr) else []
            fields = [self.generic_visit(f) for f in fields if isinstance(f, ast.FormattedValue)]
            fields.sort(key=ast.dump)
            return ast.Tuple([ast.Constant("<text>"), *fields], ast.Load())
        return super().visit(node)


def code_skeleton(source: str) -> str:
    """The code of a cell with its words set aside (comments and text-position literals):
    ``ast.dump`` of the tree in which each such literal is a placeholder holding only its
    f-string fields. Two cells with equal skeletons run the same code.

    Raises:
        SyntaxError: the cell is not Python (magics aside).
    """
    tree = ast.parse(_parsable(source))
    return ast.dump(_Skeleton(text_literals(tree)).visit(tree))
