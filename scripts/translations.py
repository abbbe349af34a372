"""The Chinese edition's catalogues: update them from the English notebooks, build, check.

One gettext catalogue per notebook, ``translations/zh/<notebook stem>.po``, read and written
with polib. Each entry is one English text of the notebook (a markdown cell, a comment run, a
text literal: see ``scripts/translation_texts.py``), its ``msgctxt`` ``<stem>#<cell id>``
ties it to the notebook and the cell, and its ``msgstr`` is the Chinese (empty: not yet).

    python scripts/translations.py update   # English -> catalogues (make translations)
    python scripts/translations.py build    # English + catalogues -> notebooks/zh/
    python scripts/translations.py check    # name every Chinese text out of date; exit 1

The README is one more source, ``translations/zh/README.po`` its catalogue, README.zh.md its
Chinese edition (``scripts/translation_readme.py``): each command does the notebooks, then the
README; ``--only README`` (or ``--only notebooks``) does one of them. README.zh.md is written
beside README.md, or into ``--out`` when that is not ``notebooks/zh`` (a preview). What
``course_utils`` prints is a third source, ``translations/zh/course_utils.po`` its catalogue,
compiled into ``course_utils/locale/`` by ``build`` (``scripts/translation_messages.py``);
``--only course_utils`` does it alone.

``update`` keeps each translation where its English still is; when a cell's English changed
it carries the old translation over marked ``fuzzy`` with the old English as
``#| msgid`` (a markdown cell always, a comment or string when the texts are alike); a
translation whose English is gone becomes obsolete (``#~``), kept as memory. Cells keep
their ids when they move, so a translation follows its cell to another notebook.
``build`` writes a Chinese notebook for each catalogue that translates all its notebook's
texts (``--all``: every notebook): the English notebook with its translated texts, no outputs
(they come from running it), Colab badges opening ``notebooks/zh/``; a fuzzy translation is not
used; a Chinese notebook whose cells would not change is left as it is, with its outputs.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import re
import sys
import time
from pathlib import Path
from typing import NamedTuple

import polib

sys.path.insert(0, str(Path(__file__).resolve().parent))
import translation_messages as messages  # noqa: E402
import translation_readme as readme  # noqa: E402
import translation_texts as texts  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CATALOGUES = ROOT / "translations" / "zh"
EDITION = ROOT / "notebooks" / "zh"
METADATA = {
    "Project-Id-Version": "transformer-course notebooks",
    "Language": "zh_CN",
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
}
_BADGE = re.compile(r"(colab\.research\.google\.com/github/[^)\s]*/notebooks/)(?!zh/)")
BADGE_ID = "colab-badge"  # scripts/sync_notebook_headers.py's badge cell: a link, no words
LIKE = 0.5  # a comment or string this alike to a vanished one inherits its translation


class Text(NamedTuple):
    """One English text of a notebook: its cell, kind and words (the catalogue's msgid)."""

    cell: str
    kind: str
    msgid: str


def notebook_texts(path: Path) -> list[Text]:
    """The translatable texts of the notebook at ``path``, in order, each once per cell."""
    found: dict[tuple[str, str], Text] = {}
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and source.strip() and cell["id"] != BADGE_ID:
            found.setdefault((cell["id"], source), Text(cell["id"], "markdown", source))
        elif cell["cell_type"] == "code":
            for span in texts.code_spans(source):
                msgid = texts.span_text(source, span)
                found.setdefault((cell["id"], msgid), Text(cell["id"], span.kind, msgid))
    return list(found.values())


def english_notebooks(folder: Path = NOTEBOOKS) -> list[Path]:
    """The numbered English notebooks, ``NN_name.ipynb``, in order."""
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def cell_of(entry: polib.POEntry) -> str:
    return (entry.msgctxt or "").rpartition("#")[2]


def _kind(entry: polib.POEntry) -> str:
    return (entry.comment or "").partition(" ")[0]


def _memory(catalogues: dict[Path, polib.POFile]) -> list[polib.POEntry]:
    """Every translated entry of every catalogue, obsolete ones too."""
    return [e for po in catalogues.values() for e in po if e.msgstr]


def _same(text: Text, memory: list[polib.POEntry], stem: str) -> polib.POEntry | None:
    """The old entry with ``text``'s words: in the same notebook's cell, else anywhere; a
    confirmed translation before a fuzzy one."""
    for here in (lambda e: e.msgctxt == f"{stem}#{text.cell}", lambda e: True):
        found = [e for e in memory if e.msgid == text.msgid and here(e)]
        if found:
            return next((e for e in found if not e.fuzzy), found[0])
    return None


def _alike(
    text: Text, memory: list[polib.POEntry], used: set[int], stem: str
) -> polib.POEntry | None:
    """The unused old entry of the same notebook, cell and kind most like ``text`` (a markdown
    cell's old text whatever the likeness, a comment's or string's from :data:`LIKE` up). Only
    the same notebook's: ids such as ``cell-03`` recur in many notebooks, and a text of
    another notebook's cell of that id is no old version of this one."""
    alike = [
        e
        for e in memory
        if id(e) not in used
        and (e.msgctxt or "").rpartition("#")[0] == stem
        and cell_of(e) == text.cell
        and _kind(e) == text.kind
    ]
    ratio = {id(e): difflib.SequenceMatcher(None, e.msgid, text.msgid).ratio() for e in alike}
    alike = [e for e in alike if text.kind == "markdown" or ratio[id(e)] >= LIKE]
    return max(alike, key=lambda e: ratio[id(e)], default=None)


def _entry(stem: str, text: Text, old: polib.POEntry | None) -> polib.POEntry:
    return readme.new_entry(
        f"{stem}#{text.cell}", text.msgid, f"{text.kind} in cell {text.cell}", old
    )


def new_catalogue() -> polib.POFile:
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(METADATA)
    return po


def update(notebooks: list[Path], folder: Path = CATALOGUES) -> dict[str, int]:
    """Rewrite ``folder``'s catalogues from ``notebooks``; counts of entries, translated,
    fuzzy and obsolete. A catalogue whose notebook is gone keeps its translations, obsolete."""
    folder.mkdir(parents=True, exist_ok=True)
    old = {path: polib.pofile(str(path)) for path in _notebook_catalogues(folder)}
    memory, used = _memory(old), set()
    plan = {nb: [[t, _same(t, memory, nb.stem)] for t in notebook_texts(nb)] for nb in notebooks}
    used = {id(old_entry) for pairs in plan.values() for _, old_entry in pairs if old_entry}
    new = {}
    for notebook, pairs in plan.items():  # what changed inherits from what vanished
        for pair in pairs:
            if pair[1] is None:
                pair[1] = _alike(pair[0], memory, used, notebook.stem)
                used.add(id(pair[1])) if pair[1] is not None else None
        po = new_catalogue()
        po.extend(_entry(notebook.stem, text, old_entry) for text, old_entry in pairs)
        new[folder / f"{notebook.stem}.po"] = po
    for path, po in old.items():
        left = [e for e in po if e.msgstr and id(e) not in used]
        if path not in new and not left:
            path.unlink()
            continue
        target = new.setdefault(path, new_catalogue())
        for entry in left:
            entry.obsolete = True
            target.append(entry)
    for path, po in new.items():
        po.save(str(path))
    return _counts(new.values())


def _notebook_catalogues(folder: Path) -> list[Path]:
    """``folder``'s catalogues of notebooks: README.po is the README's (its own update)."""
    return [p for p in sorted(folder.glob("*.po")) if p.stem not in (readme.STEM, messages.STEM)]


def _counts(catalogues) -> dict[str, int]:
    entries = [e for po in catalogues for e in po]
    return {
        "entries": sum(1 for e in entries if not e.obsolete),
        "translated": sum(1 for e in entries if e.msgstr and not e.obsolete and not e.fuzzy),
        "fuzzy": sum(1 for e in entries if e.fuzzy and not e.obsolete),
        "obsolete": sum(1 for e in entries if e.obsolete),
    }


def out_of_date(notebooks: list[Path], folder: Path = CATALOGUES) -> list[str]:
    """One line per Chinese text out of date with its English source: marked fuzzy, or its
    English no longer in the notebook's cell (changed, moved or deleted since), or its
    notebook gone. Read from the English notebooks as they are now, not from ``update``."""
    current = {nb.stem: {(t.cell, t.msgid) for t in notebook_texts(nb)} for nb in notebooks}
    stale = []
    for path in _notebook_catalogues(folder):
        for entry in polib.pofile(str(path)):
            if not entry.msgstr or entry.obsolete:
                continue
            stem = (entry.msgctxt or "").rpartition("#")[0]
            why = (
                "marked fuzzy: its English changed, check the translation and drop the flag"
                if entry.fuzzy
                else f"its notebook {stem}.ipynb is gone"
                if stem not in current
                else "its English is no longer in that cell (changed or moved)"
                if (cell_of(entry), entry.msgid) not in current[stem]
                else None
            )
            if why:
                english = " ".join(entry.msgid.split())[:70]
                stale.append(f"{path.name} {entry.msgctxt}: {why}; English: {english!r}")
    return stale


def build(notebook: Path, catalogue: Path, out: Path) -> tuple[int, int]:
    """Write the Chinese edition of ``notebook`` to ``out``: each text replaced by its
    translation in ``catalogue`` (fuzzy ones and missing ones stay English), outputs cleared,
    Colab badges pointing to ``notebooks/zh/``. Returns ``(texts translated, texts)``.

    Raises:
        ValueError: a translation cannot stand in the code, or the built code differs from the
            English once words are set aside; the message names the cell.
    """
    english = json.loads(notebook.read_text(encoding="utf-8"))
    po = polib.pofile(str(catalogue)) if catalogue.is_file() else []
    table = {
        (cell_of(e), e.msgid): e.msgstr for e in po if e.msgstr and not e.fuzzy and not e.obsolete
    }
    wanted = {(t.cell, t.msgid) for t in notebook_texts(notebook)}
    chinese = copy.deepcopy(english)
    for cell in chinese["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            source = _BADGE.sub(r"\1zh/", table.get((cell["id"], source), source))
        elif cell["cell_type"] == "code":
            mine = {msgid: msgstr for (c, msgid), msgstr in table.items() if c == cell["id"]}
            translated = texts.replace_texts(source, mine)
            _check_same_code(notebook, cell["id"], source, translated)
            source = translated
            cell["outputs"], cell["execution_count"] = [], None
        cell["source"] = source.splitlines(keepends=True)
    _write_keeping_outputs(out, chinese)
    return len(wanted & set(table)), len(wanted)


def _write_keeping_outputs(path: Path, notebook: dict) -> None:
    """Write ``notebook`` to ``path``, unless ``path`` already holds the same cells (ids, types,
    sources): then it stays as it is, outputs and all. When only markdown changed (the same code
    cells, in order), ``notebook``'s code cells take the executed outputs: they are still true,
    so a retranslated paragraph needs no new run."""
    if path.is_file():
        old = json.loads(path.read_text(encoding="utf-8"))
        if _cells(old) == _cells(notebook):
            return
        code = [c for c in old["cells"] if c["cell_type"] == "code"]
        new = [c for c in notebook["cells"] if c["cell_type"] == "code"]
        if _cells({"cells": code}) == _cells({"cells": new}):
            for executed, cell in zip(code, new):
                cell["outputs"] = executed["outputs"]
                cell["execution_count"] = executed["execution_count"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _cells(notebook: dict) -> list[tuple]:
    """A notebook's cells as (id, type, source): what a rebuild compares."""
    return [(c.get("id"), c["cell_type"], "".join(c["source"])) for c in notebook["cells"]]


def _check_same_code(notebook: Path, cell: str, english: str, chinese: str) -> None:
    """ValueError when the Chinese code cell runs other code than the English one."""
    if english != chinese and texts.code_skeleton(english) != texts.code_skeleton(chinese):
        raise ValueError(
            f"{notebook.name} cell {cell}: the translated code differs from the English once "
            "comments and texts are set aside (a translated name, or a lost f-string field); "
            "fix its entries in the catalogue"
        )


def code_differences(english: Path, chinese: Path) -> list[str]:
    """One line per place where the Chinese notebook is not the English one in other words:
    cells that differ in number, id or type, and code cells whose code differs once comments
    and text literals are set aside (:func:`translation_texts.code_skeleton`)."""
    cells = [json.loads(p.read_text(encoding="utf-8"))["cells"] for p in (english, chinese)]
    shape = [[(c.get("id"), c["cell_type"]) for c in side] for side in cells]
    if shape[0] != shape[1]:
        return [f"{chinese.name}: its cells (ids, types) are not those of {english.name}"]
    found = []
    for en, zh in zip(*cells):
        sources = ["".join(en["source"]), "".join(zh["source"])]
        if en["cell_type"] == "code" and len({texts.code_skeleton(s) for s in sources}) > 1:
            found.append(f"{chinese.name} cell {en['id']}: its code is not the English code")
    return found


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"translations.py: {message}; see python scripts/translations.py --help\n")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["update", "build", "check"])
    parser.add_argument("--all", action="store_true", help="build: every notebook, the README")
    parser.add_argument(
        "--only", choices=["notebooks", readme.STEM, messages.STEM], help="one of the three"
    )
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS, help="English notebooks")
    parser.add_argument("--readme", type=Path, help="English README (default: beside notebooks)")
    parser.add_argument("--catalogues", type=Path, default=CATALOGUES, help="the .po files")
    parser.add_argument("--out", type=Path, help="build: Chinese notebooks (NOTEBOOKS/zh)")
    args = parser.parse_args(argv)
    if not english_notebooks(args.notebooks):
        parser.error(f"--notebooks {args.notebooks} holds no NN_name.ipynb notebook")
    if args.all and args.command != "build":
        parser.error(f"--all is an option of build, not of {args.command}")
    if args.command == "build" and args.out and args.out.resolve() == args.notebooks.resolve():
        parser.error(f"--out {args.out} is the English folder; give another, e.g. notebooks/zh")
    if args.readme is not None and not args.readme.is_file():
        parser.error(f"--readme {args.readme} is not a file; give the English README.md")
    edition = args.notebooks / "zh"
    args.readme = args.readme or args.notebooks.parent / "README.md"
    if args.only == readme.STEM and not args.readme.is_file():
        parser.error(f"--only README: there is no {args.readme}; give --readme README.md")
    args.out = args.out or edition
    inside = args.out.resolve() == edition.resolve()
    args.readme_out = args.readme.with_name("README.zh.md") if inside else args.out / "README.zh.md"
    return args


def _with_readme(args: argparse.Namespace) -> bool:
    """The command does the README: not ``--only notebooks``, and a README or its catalogue."""
    catalogue = args.catalogues / f"{readme.STEM}.po"
    return args.only in (None, readme.STEM) and (args.readme.is_file() or catalogue.is_file())


def _with_messages(args: argparse.Namespace) -> bool:
    """The command does ``course_utils``'s messages: no ``--only``, or ``--only course_utils``,
    and the catalogues are the course's (a test's own folder has no messages)."""
    course = args.catalogues.resolve() == CATALOGUES.resolve()
    return args.only == messages.STEM or (args.only is None and course)


def _update(args: argparse.Namespace) -> int:
    said = []
    if args.only in (None, "notebooks"):
        said.append((args.catalogues, update(english_notebooks(args.notebooks), args.catalogues)))
    if _with_readme(args):
        po = readme.update_readme(args.readme, args.catalogues)
        said.append((args.catalogues / f"{readme.STEM}.po", _counts([po])))
    if _with_messages(args):
        po = messages.update_messages(args.catalogues)
        said.append((args.catalogues / f"{messages.STEM}.po", _counts([po])))
    for where, counts in said:
        print(f"updated {where}: " + ", ".join(f"{v:,} {k}" for k, v in counts.items()))
    return 0


def _build(args: argparse.Namespace) -> int:
    if _with_messages(args):  # first: the notebooks' outputs come from running them with it
        done, total = messages.build_messages(args.catalogues)
        print(f"{messages.compiled_path()}: {done} of {total} messages translated")
    if args.only in (None, "notebooks"):
        for notebook in english_notebooks(args.notebooks):
            catalogue = args.catalogues / f"{notebook.stem}.po"
            if args.all or _complete(notebook, catalogue):
                done, total = build(notebook, catalogue, args.out / notebook.name)
                print(f"{args.out / notebook.name}: {done} of {total} texts translated")
    catalogue = args.catalogues / f"{readme.STEM}.po"
    if _with_readme(args) and args.readme.is_file():
        if args.all or readme.readme_complete(args.readme, catalogue):  # notebooks built first
            where = (args.readme, catalogue, args.readme_out, args.notebooks, args.out)
            done, total = readme.build_readme(*where)
            print(f"{args.readme_out}: {done} of {total} blocks translated")
    return 0


def _check(args: argparse.Namespace) -> int:
    stale = []
    if args.only in (None, "notebooks"):
        stale += out_of_date(english_notebooks(args.notebooks), args.catalogues)
    if _with_messages(args):
        stale += messages.messages_out_of_date(args.catalogues)
    if _with_readme(args):
        stale += readme.readme_out_of_date(args.readme, args.catalogues)
    print("\n".join(stale) or "no Chinese text is out of date with its English source")
    if stale:
        print(f"{len(stale)} Chinese texts out of date: fix their entries in {args.catalogues}")
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    start = time.perf_counter()
    status = {"update": _update, "build": _build, "check": _check}[args.command](args)
    print(f"{args.command} took {time.perf_counter() - start:.1f} s")
    return status


def _complete(notebook: Path, catalogue: Path) -> bool:
    """Every text of ``notebook`` has a translation (not fuzzy) in ``catalogue``: only then is
    its Chinese notebook built (a text shared by many notebooks, the setup cell say, is
    translated in all of them at once, which alone makes no Chinese notebook)."""
    if not catalogue.is_file():
        return False
    po = polib.pofile(str(catalogue))
    done = {(cell_of(e), e.msgid) for e in po if e.msgstr and not e.fuzzy and not e.obsolete}
    return {(t.cell, t.msgid) for t in notebook_texts(notebook)} <= done


if __name__ == "__main__":
    sys.exit(main())
