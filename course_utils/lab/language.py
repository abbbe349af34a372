"""The language ``course_utils`` speaks in: what it prints, its plot labels, its checkers' verdicts.

The English edition's setup cell calls ``setup(language="en")``, the Chinese edition's
``setup(language="zh")`` (the literal is a text of the notebook's catalogue, translated like its
prose), and :func:`course_utils.lab.bootstrap.setup` passes it to :func:`set_language`. Every
message meant for the learner is written in English inside :func:`tr`, which returns it in the
current language::

    print(tr("✅ {title}: correct").format(title=title))

A message written before it is shown (a module-level table of a checker's mistakes, say) is
marked with :func:`N_` where it is written, so that the catalogue collects it, and translated
with :func:`translated` where it is shown, in the language of that moment.

The Chinese messages are a gettext catalogue, ``translations/zh/course_utils.po`` (``python
scripts/translations.py update`` collects every ``tr("...")`` of the package into it), compiled
by ``build`` into ``course_utils/locale/zh/LC_MESSAGES/course_utils.mo``, which the standard
library's :mod:`gettext` reads here. A message the catalogue lacks stays English. Exceptions
raised for wrong arguments stay English, the language of the code and of the libraries'
errors, so that they can be searched for.

Standard library only: the setup cell imports this before anything heavy.
"""

from __future__ import annotations

import gettext
import os
import string
import unicodedata
from functools import cache
from pathlib import Path

#: The languages the course is written in: English, Simplified Chinese.
LANGUAGES = ("en", "zh")
#: Read once at import, so that a script or a test can choose the language too.
ENV = "COURSE_LANGUAGE"
LOCALE = Path(__file__).resolve().parents[1] / "locale"  # course_utils/locale
DOMAIN = "course_utils"

_current = os.environ.get(ENV, "en") if os.environ.get(ENV, "en") in LANGUAGES else "en"


def set_language(language: str) -> None:
    """Make ``course_utils`` speak ``language`` from now on (one of :data:`LANGUAGES`).

    Also sets ``COURSE_LANGUAGE`` in ``os.environ``, so that a process started from here speaks
    it too.

    Raises:
        ValueError: ``language`` is not one of :data:`LANGUAGES`; the message names them.
    """
    global _current
    _check_language(language)
    _current = language
    os.environ[ENV] = language


def _check_language(language: str) -> None:
    if language not in LANGUAGES:
        raise ValueError(
            f"language={language!r} is not one of the course's languages {LANGUAGES}; "
            'call setup(language="en") or setup(language="zh")'
        )


def current_language() -> str:
    """The language ``course_utils`` speaks now: ``"en"`` or ``"zh"``."""
    return _current


@cache
def _catalogue(language: str) -> gettext.NullTranslations:
    return gettext.translation(DOMAIN, LOCALE, languages=[language], fallback=True)


def tr(message: str) -> str:
    """``message`` (English, a literal, its fields ``{name}`` still to fill with ``.format``) in
    the current language; the English itself where the catalogue has no translation."""
    return translated(message)


def N_(message: str) -> str:  # noqa: N802 (gettext's name for it)
    """Mark ``message`` (a literal) for the catalogue and return it unchanged, still English:
    :func:`translated` turns it into the current language where it is shown."""
    return message


def translated(message: str) -> str:
    """``message``, a text marked with :func:`N_` or a :func:`tr` literal's English, in the
    current language (the English where the catalogue has no translation); an empty message
    or None comes back as it is."""
    if _current == "en" or not message:  # gettext("") is the catalogue's header
        return message
    return ChineseMessage(_catalogue(_current).gettext(message))


def display_width(text: str) -> int:
    """Columns ``text`` takes in a monospace font or a terminal: a wide (East Asian Wide or
    Fullwidth, e.g. Chinese) character takes two, as ``f"{text:<n}"`` does not know."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def padded(text: str, width: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` columns (:func:`display_width`), on the left
    when ``right`` (a right-aligned cell); unchanged when it is already as wide."""
    pad = " " * max(0, width - display_width(text))
    return pad + text if right else text + pad


def _is_cjk(char: str) -> bool:
    """Whether ``char`` is a Chinese character or a full-width (CJK) punctuation mark."""
    return (
        "\u4e00" <= char <= "\u9fff"  # CJK unified ideographs
        or "\u3400" <= char <= "\u4dbf"  # their extension A
        or "\u3000" <= char <= "\u303f"  # CJK punctuation: 、。「」
        or "\uff00" <= char <= "\uffef"  # full-width forms: ，：（）
    )


def _chinese_on_both_sides(left: str, right: str) -> bool:
    return bool(left and right) and _is_cjk(left[-1]) and _is_cjk(right[0])


class ChineseMessage(str):
    """A Chinese message whose :meth:`format` leaves out the space beside a field whose value
    is itself Chinese.

    A catalogue's translation writes a space between a field and Chinese text, as Chinese
    typesetting does between Latin and Chinese (``"{name} 的形状"`` → ``"x 的形状"``). When the
    value is Chinese too (``name="结果"``), that space would split the words (``"结果 的形状"``);
    here it goes (``"结果的形状"``). Only a single space at a field's edge with Chinese on both
    sides is left out: the translation's text and the values are never changed. (A field inside
    a format spec is named or numbered: ``"{x:{w}}"``, not ``"{:{}}"``.)
    """

    __slots__ = ()

    def format(self, *args: object, **kwargs: object) -> str:
        formatter = string.Formatter()
        out: list[str] = []
        value = ""  # the field just written; "" after a literal
        auto = 0
        for literal, field, spec, conversion in formatter.parse(self):
            if literal:
                if literal.startswith(" ") and _chinese_on_both_sides(value, literal[1:]):
                    literal = literal[1:]  # "{name} 的" with a Chinese name
                out.append(literal)
                value = ""
            if field is None:  # the end, or an escaped brace ("{{")
                continue
            if field == "":  # "{}": the next positional argument
                field, auto = str(auto), auto + 1
            obj, _ = formatter.get_field(field, args, kwargs)
            spec = formatter.vformat(spec, args, kwargs) if "{" in spec else spec
            value = formatter.format_field(formatter.convert_field(obj, conversion), spec)
            before = out[-1] if literal else ""
            if before.endswith(" ") and _chinese_on_both_sides(before[:-1], value):
                out[-1] = before[:-1]  # "的 {name}" with a Chinese name
            out.append(value)
        return "".join(out)
