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
    current language (the English where the catalogue has no translation)."""
    if _current == "en" or not message:  # gettext("") is the catalogue's header
        return message
    return _catalogue(_current).gettext(message)
