"""The Chinese edition's corpus: Tang regulated verse, shipped in ``assets/corpus-zh/``.

The counterpart of :func:`course_utils.data.load_shakespeare` for the Chinese edition. The
file is written by ``scripts/prepare_zh_corpus.py`` from the npm package ``chinese-poetry``
2.0.1 (MIT) and committed with its licence and a SOURCE.md note; nothing is downloaded here.
"""

from __future__ import annotations

from pathlib import Path

from course_utils.checks import check_int
from course_utils.lab.assets import ASSETS_DIR

TANG_POEMS_PATH = ASSETS_DIR / "corpus-zh" / "tang_poems.txt"


def load_tang_poems(max_chars: int | None = None) -> str:
    """About 19,000 Tang regulated poems (quatrains and octaves) in simplified characters.

    One poem a paragraph, poems separated by a blank line: the title line, then one line per
    couplet (``床前明月光，疑是地上霜。``). About 1.07 million characters (3.0 MB of UTF-8),
    about 5,800 distinct (so ln V is about 8.7 nats, against 4.4 for Shakespeare's 84), some
    87 % of the non-space characters CJK ideographs; ``assets/corpus-zh/SOURCE.md`` gives the
    exact figures, the selection and the conversion. Source: the Complete Tang Poems as
    published in the npm package ``chinese-poetry`` 2.0.1 (MIT licence), converted from
    traditional characters with OpenCC (``t2s``) by ``scripts/prepare_zh_corpus.py``. The
    poems are in a fixed pseudo-random order, so a tail held out for validation samples the
    whole collection.

    Args:
        max_chars: keep only the first ``max_chars`` characters (for quick demos); an int
            ``>= 1``, or None for the whole corpus.

    Returns:
        The text, a ``str``.

    Raises:
        FileNotFoundError: the corpus file is missing (a partial checkout); the message names
            the path and how to restore it.
        TypeError: ``max_chars`` is not an int (``1e4`` included: pass ``int(1e4)``).
        ValueError: ``max_chars < 1``.
    """
    if max_chars is not None:
        max_chars = check_int(max_chars, "max_chars", minimum=1, why="None keeps everything")
    _check_corpus_file(TANG_POEMS_PATH)
    text = TANG_POEMS_PATH.read_text(encoding="utf-8")
    return text if max_chars is None else text[:max_chars]


def _check_corpus_file(path: Path) -> None:
    """FileNotFoundError when the committed corpus file is not there."""
    if not path.is_file():
        raise FileNotFoundError(
            f"the Chinese corpus is missing: no file at {path}; it comes with the course's "
            "repository (git clone it, or `git checkout -- assets/corpus-zh`), and "
            "`python scripts/prepare_zh_corpus.py` writes it again from its npm package"
        )
