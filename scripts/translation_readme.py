"""The README's Chinese edition: README.md's blocks as catalogue entries, README.zh.md built.

README.md's texts are its markdown blocks: a heading line, a paragraph (its lines up to a
blank line), a list or a table, each one block (a list whose items are parted by blank lines
too). A fenced code block is never a text: commands stay as they are, and the block is copied
into README.zh.md unchanged. Each block is one entry of ``translations/zh/README.po`` whose
``msgctxt`` ``README#<slug>`` ties it to the section it is in (the slug is the anchor GitHub
gives the heading above the block; text before any heading has the empty slug).

:func:`update_readme` keeps each translation where its English still is (in its section, or
anywhere in the README once its section was renamed); a changed block inherits, marked
``fuzzy`` with its old English as ``#| msgid``, the old block of its kind most like it (from
:data:`LIKE` up, its own section first; the one vanished block of a section for the one new
block of the same kind there, whatever the likeness); a block whose English is gone becomes
obsolete (``#~``). :func:`build_readme` writes README.zh.md, links into ``notebooks/`` pointing
to the Chinese notebook where one exists. No import of ``translations.py`` (it imports this).
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import NamedTuple

import polib

STEM = "README"  # the catalogue is README.po, each msgctxt README#<section slug>
TEXT_KINDS = ("heading", "paragraph", "list", "table")
LIKE = 0.5  # a changed block this alike to a vanished one inherits its translation
METADATA = {
    "Project-Id-Version": "transformer-course README",
    "Language": "zh_CN",
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
}
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(\s+#+)?\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d{1,9}[.)])\s")


class Piece(NamedTuple):
    """A run of README lines, each with its newline: a text (``kind`` one of
    :data:`TEXT_KINDS`), a fenced code block (``"fence"``) or blank lines (``"blank"``), in
    the section whose slug is ``section``."""

    kind: str
    section: str
    source: str

    @property
    def msgid(self) -> str:
        """The catalogue's words: the block without its last newline."""
        return self.source.rstrip("\n")


def _fence_end(lines: list[str], start: int) -> int:
    """Index after the fenced block opened at ``lines[start]`` (its end: the file's end)."""
    mark = _FENCE.match(lines[start]).group(1)
    closing = re.compile(rf"^\s*{re.escape(mark[0])}{{{len(mark)},}}\s*$")
    end = start + 1
    while end < len(lines) and not closing.match(lines[end]):
        end += 1
    return min(end + 1, len(lines))


def _runs(markdown: str) -> list[tuple[str, list[str]]]:
    """``markdown`` cut into ``(kind, lines)``: fences, blank runs, headings, text runs."""
    lines, runs, at = markdown.splitlines(keepends=True), [], 0
    while at < len(lines):
        line = lines[at]
        if _FENCE.match(line):
            kind, end = "fence", _fence_end(lines, at)
        elif _HEADING.match(line):
            kind, end = "heading", at + 1
        else:
            kind, end = ("blank" if not line.strip() else _text_kind(line)), at + 1
            while end < len(lines) and _goes_on(kind, lines[end]):
                end += 1
        runs.append((kind, lines[at:end]))
        at = end
    return runs


def _goes_on(kind: str, line: str) -> bool:
    """``line`` continues a run of ``kind``: a blank run a blank line, a text any line but a
    blank one, a fence or a heading."""
    if kind == "blank" or not line.strip():
        return kind == "blank" and not line.strip()
    return not (_FENCE.match(line) or _HEADING.match(line))


def _text_kind(first_line: str) -> str:
    if first_line.lstrip().startswith("|"):
        return "table"
    return "list" if _LIST_ITEM.match(first_line) else "paragraph"


def _merge_loose_lists(runs: list[tuple[str, list[str]]]) -> list[tuple[str, list[str]]]:
    """A list's later items (or indented paragraphs) after blank lines join the list."""
    merged: list[tuple[str, list[str]]] = []
    for kind, lines in runs:
        joins = kind in ("list", "paragraph") and (
            kind == "list" or lines[0].startswith(("  ", "\t"))
        )
        if joins and len(merged) >= 2 and merged[-1][0] == "blank" and merged[-2][0] == "list":
            blank = merged.pop()[1]
            merged[-1] = ("list", merged[-1][1] + blank + lines)
        else:
            merged.append((kind, lines))
    return merged


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's words: lower case, punctuation dropped, spaces to
    hyphens (``"中文版: the Chinese edition"`` -> ``"中文版-the-chinese-edition"``)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def pieces(markdown: str) -> list[Piece]:
    """``markdown`` as pieces, in order; ``"".join(p.source for p in pieces(m)) == m``. A
    repeated heading's slug gets ``-1``, ``-2``... as GitHub's anchors do."""
    found, section, seen = [], "", {}
    for kind, lines in _merge_loose_lists(_runs(markdown)):
        if kind == "heading":
            base = slug(_HEADING.match(lines[0]).group(2))
            section = base if base not in seen else f"{base}-{seen[base]}"
            seen[base] = seen.get(base, 0) + 1
        found.append(Piece(kind, section, "".join(lines)))
    return found


def readme_texts(readme: Path) -> list[Piece]:
    """The translatable blocks of the README at ``readme``, in order, each once per section."""
    found: dict[tuple[str, str], Piece] = {}
    for piece in pieces(readme.read_text(encoding="utf-8")):
        if piece.kind in TEXT_KINDS:
            found.setdefault((piece.section, piece.msgid), piece)
    return list(found.values())


def section_of(entry: polib.POEntry) -> str:
    return (entry.msgctxt or "").partition("#")[2]


def _kind(entry: polib.POEntry) -> str:
    return (entry.comment or "").partition(" ")[0]


def _same(text: Piece, memory: list[polib.POEntry]) -> polib.POEntry | None:
    """The old entry with ``text``'s words: in its section, else anywhere in the README; a
    confirmed translation before a fuzzy one."""
    for here in (lambda e: section_of(e) == text.section, lambda e: True):
        found = [e for e in memory if e.msgid == text.msgid and here(e)]
        if found:
            return next((e for e in found if not e.fuzzy), found[0])
    return None


def _pair_alike(pairs: list[list], memory: list[polib.POEntry], used: set[int]) -> None:
    """Give each new block still without an old entry the unused old entry of its kind most
    like it (from :data:`LIKE` up; its own section first, then the likest pair first); then,
    in a section with one such block and one unused entry of its kind, that entry."""
    options = []
    for n, (text, old) in enumerate(pairs):
        for entry in memory if old is None else []:
            if id(entry) not in used and _kind(entry) == text.kind:
                ratio = difflib.SequenceMatcher(None, entry.msgid, text.msgid).ratio()
                if ratio >= LIKE:
                    options.append((section_of(entry) == text.section, ratio, n, entry))
    for _, _, n, entry in sorted(options, key=lambda o: o[:2], reverse=True):
        if pairs[n][1] is None and id(entry) not in used:
            pairs[n][1] = entry
            used.add(id(entry))
    for n, (text, old) in enumerate(pairs):
        new = [p for p in pairs if p[1] is None and p[0][:2] == text[:2]]
        gone = [
            e
            for e in memory
            if id(e) not in used and (_kind(e), section_of(e)) == (text.kind, text.section)
        ]
        if old is None and len(new) == 1 and len(gone) == 1:
            pairs[n][1] = gone[0]
            used.add(id(gone[0]))


def _entry(text: Piece, old: polib.POEntry | None) -> polib.POEntry:
    where = f"README section {text.section or '(top)'}"
    return new_entry(f"{STEM}#{text.section}", text.msgid, f"{text.kind} in {where}", old)


def new_entry(msgctxt: str, msgid: str, comment: str, old: polib.POEntry | None) -> polib.POEntry:
    """A catalogue entry for an English text (a notebook's or the README's), carrying ``old``'s
    translation: as it is when its English is the same, else marked fuzzy with the old English
    (``#| msgid``) for a translator to check."""
    entry = polib.POEntry(msgctxt=msgctxt, msgid=msgid, msgstr="", comment=comment)
    if old is not None:
        entry.msgstr = old.msgstr
        if old.msgid != msgid or old.fuzzy:
            entry.flags.append("fuzzy")
            entry.previous_msgid = old.previous_msgid or old.msgid
    return entry


def update_readme(readme: Path, folder: Path) -> polib.POFile:
    """Rewrite ``folder/README.po`` from ``readme`` (see the module's docstring) and return
    it. A missing README leaves every translation obsolete; nothing else of ``folder`` is
    read or written."""
    path = folder / f"{STEM}.po"
    old = polib.pofile(str(path)) if path.is_file() else []
    memory = [e for e in old if e.msgstr]
    texts = readme_texts(readme) if readme.is_file() else []
    pairs = [[text, _same(text, memory)] for text in texts]
    used = {id(entry) for _, entry in pairs if entry is not None}
    _pair_alike(pairs, memory, used)
    used = {id(entry) for _, entry in pairs if entry is not None}
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(METADATA)
    po.extend(_entry(text, entry) for text, entry in pairs)
    for entry in memory:
        if id(entry) not in used:
            entry.obsolete = True
            po.append(entry)
    folder.mkdir(parents=True, exist_ok=True)
    po.save(str(path))
    return po


def readme_out_of_date(readme: Path, folder: Path) -> list[str]:
    """One line per Chinese README block out of date with its English: marked fuzzy, or its
    English no longer in that section of ``readme`` (changed, moved or deleted since), or the
    README gone. Read from the README as it is now, not from :func:`update_readme`."""
    path = folder / f"{STEM}.po"
    if not path.is_file():
        return []
    current = {(t.section, t.msgid) for t in readme_texts(readme)} if readme.is_file() else None
    stale = []
    for entry in polib.pofile(str(path)):
        if not entry.msgstr or entry.obsolete:
            continue
        why = (
            "marked fuzzy: its English changed, check the translation and drop the flag"
            if entry.fuzzy
            else f"{readme.name} is gone"
            if current is None
            else "its English is no longer in that section of the README (changed or moved)"
            if (section_of(entry), entry.msgid) not in current
            else None
        )
        if why:
            english = " ".join(entry.msgid.split())[:70]
            stale.append(f"{path.name} {entry.msgctxt}: {why}; English: {english!r}")
    return stale


def _translations(catalogue: Path) -> dict[tuple[str, str], str]:
    po = polib.pofile(str(catalogue)) if catalogue.is_file() else []
    return {
        (section_of(e), e.msgid): e.msgstr
        for e in po
        if e.msgstr and not e.fuzzy and not e.obsolete
    }


def readme_complete(readme: Path, catalogue: Path) -> bool:
    """Every block of ``readme`` has a translation (not fuzzy) in ``catalogue``."""
    table = _translations(catalogue)
    return readme.is_file() and all((t.section, t.msgid) in table for t in readme_texts(readme))


def link_notebooks(markdown: str, readme: Path, out: Path, notebooks: Path, edition: Path) -> str:
    """``markdown`` (a text of ``readme``) with each link to a notebook of ``notebooks``
    pointing, from ``out``'s folder, to the Chinese notebook in ``edition`` where that
    exists, else to the English one. Inline links and reference definitions alike."""
    english = Path(os.path.relpath(notebooks, readme.parent)).as_posix()
    link = re.compile(
        r"(\]\(\s*<?|^\s{0,3}\[[^\]]+\]:\s*<?)" + re.escape(english) + r"/([^)\s/#?<>]+\.ipynb)",
        re.MULTILINE,
    )

    def point(match: re.Match) -> str:
        chinese = edition / match[2]
        target = chinese if chinese.is_file() else notebooks / match[2]
        return match[1] + Path(os.path.relpath(target, out.parent)).as_posix()

    return link.sub(point, markdown)


def chinese_readme(
    readme: Path, catalogue: Path, out: Path, notebooks: Path, edition: Path
) -> tuple[str, int, int]:
    """The Chinese README that belongs at ``out``: each block of ``readme`` replaced by its
    translation in ``catalogue`` (fuzzy and missing ones stay English), fenced code blocks
    and blank lines as they are, notebook links as :func:`link_notebooks` makes them.
    Returns ``(text, blocks translated, blocks)``."""
    table, done, parts = _translations(catalogue), set(), []
    for piece in pieces(readme.read_text(encoding="utf-8")):
        source = piece.source
        if piece.kind in TEXT_KINDS:
            key = (piece.section, piece.msgid)
            if key in table:
                done.add(key)
                source = table[key].strip("\n") + source[len(piece.msgid) :]
            source = link_notebooks(source, readme, out, notebooks, edition)
        parts.append(source)
    return "".join(parts), len(done), len(readme_texts(readme))


def build_readme(
    readme: Path, catalogue: Path, out: Path, notebooks: Path, edition: Path
) -> tuple[int, int]:
    """Write :func:`chinese_readme` to ``out`` (only when its text changes); returns
    ``(blocks translated, blocks)``."""
    chinese, done, total = chinese_readme(readme, catalogue, out, notebooks, edition)
    if not out.is_file() or out.read_text(encoding="utf-8") != chinese:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(chinese, encoding="utf-8")
    return done, total
