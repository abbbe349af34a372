"""What ``course_utils`` says, in Chinese: its ``tr("...")`` messages as one gettext catalogue.

Every message the package shows the learner (a checker's verdict, a ladder line, a plot label)
is an English literal inside ``course_utils.lab.language.tr`` (or ``N_``, for a message written
before it is shown). :func:`messages` finds them all by
reading the package's source (``ast``); :func:`update_messages` merges them into
``translations/zh/course_utils.po`` (a new message untranslated; a message gone, obsolete;
each entry's ``#:`` lines say where it is used); :func:`build_messages` compiles the
catalogue into ``course_utils/locale/zh/LC_MESSAGES/course_utils.mo``, the file the standard
library's :mod:`gettext` reads at run time (committed, so that a clone in Colab has it);
:func:`messages_out_of_date` names every message without a translation, a translation whose
``{fields}`` are not the English ones, and a compiled file out of step with its catalogue.
No import of ``translations.py`` (it imports this).
"""

from __future__ import annotations

import ast
import string
from pathlib import Path

import polib

STEM = "course_utils"  # the catalogue is course_utils.po, the gettext domain course_utils
FUNCTIONS = ("tr", "N_")  # N_ marks a message translated later, where it is shown
METADATA = {
    "Project-Id-Version": "transformer-course course_utils",
    "Language": "zh_CN",
    "MIME-Version": "1.0",
    "Content-Type": "text/plain; charset=UTF-8",
    "Content-Transfer-Encoding": "8bit",
}
ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "course_utils"


def compiled_path(package: Path = PACKAGE) -> Path:
    return package / "locale" / "zh" / "LC_MESSAGES" / f"{STEM}.mo"


def messages(package: Path = PACKAGE) -> dict[str, list[tuple[str, int]]]:
    """Every ``tr("...")`` literal of the package, with where it is (path, line), in order.

    Raises:
        ValueError: a ``tr`` call whose argument is not one string literal (the catalogue could
            not hold it); the message names the file and line.
    """
    found: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(package.rglob("*.py")):
        where = path.relative_to(package.parent).as_posix()
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in FUNCTIONS
        ]
        for node in sorted(calls, key=lambda node: (node.lineno, node.col_offset)):
            arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
            if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
                raise ValueError(
                    f"{where}:{node.lineno}: {node.func.id}() takes one string literal (fields as "
                    "{name}, filled by .format after it), not an expression or an f-string"
                )
            found.setdefault(arg.value, []).append((where, node.lineno))
    return found


def _catalogue(path: Path) -> polib.POFile:
    if path.is_file():
        return polib.pofile(str(path), wrapwidth=78)
    po = polib.POFile(wrapwidth=78)
    po.metadata = dict(METADATA)
    return po


def update_messages(folder: Path, package: Path = PACKAGE) -> polib.POFile:
    """Merge the package's messages into ``folder/course_utils.po`` and save it."""
    path = folder / f"{STEM}.po"
    po, found = _catalogue(path), messages(package)
    old = {e.msgid: e for e in po}
    entries = []
    for msgid, places in found.items():
        entry = old.pop(msgid, None) or polib.POEntry(msgid=msgid, msgstr="")
        entry.obsolete, entry.occurrences = False, [(p, str(line)) for p, line in places]
        entries.append(entry)
    for entry in old.values():  # English gone: kept as memory
        entry.obsolete, entry.occurrences = True, []
        entries.append(entry)
    po[:] = entries
    folder.mkdir(parents=True, exist_ok=True)
    po.save(str(path))
    return po


def _fields(text: str) -> list[str]:
    return sorted(f for _, f, _, _ in string.Formatter().parse(text) if f is not None)


def messages_out_of_date(folder: Path, package: Path = PACKAGE) -> list[str]:
    """What is wrong with the messages' Chinese, one line each (empty when nothing is)."""
    path = folder / f"{STEM}.po"
    po = {e.msgid: e for e in _catalogue(path) if not e.obsolete}
    stale = []
    for msgid, places in messages(package).items():
        entry, (where, line) = po.get(msgid), places[0]
        if entry is None or not entry.msgstr or entry.fuzzy:
            stale.append(f"{path.name}: {where}:{line} {msgid!r} has no Chinese")
        elif _fields(entry.msgstr) != _fields(msgid):
            stale.append(
                f"{path.name}: {where}:{line} {msgid!r}: the Chinese has the fields "
                f"{_fields(entry.msgstr)}, the English {_fields(msgid)}"
            )
    compiled = compiled_path(package)
    if path.is_file() and not stale and _compiled(path) != _read_compiled(compiled):
        stale.append(f"{compiled}: out of step with {path.name}; run translations.py build")
    return stale


def _compiled(path: Path) -> dict[str, str]:
    po = polib.pofile(str(path))
    return {e.msgid: e.msgstr for e in po.translated_entries() if not e.obsolete}


def _read_compiled(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    return {e.msgid: e.msgstr for e in polib.mofile(str(path)) if e.msgid}


def build_messages(folder: Path, package: Path = PACKAGE) -> tuple[int, int]:
    """Compile ``folder/course_utils.po`` (its translated entries) for :mod:`gettext`.

    Returns:
        (messages translated, messages in the package).
    """
    po = _catalogue(folder / f"{STEM}.po")
    compiled = compiled_path(package)
    compiled.parent.mkdir(parents=True, exist_ok=True)
    po.save_as_mofile(str(compiled))
    total = messages(package)
    done = sum(1 for e in po.translated_entries() if e.msgid in total)
    return done, len(total)
