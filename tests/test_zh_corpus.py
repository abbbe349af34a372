"""The Chinese corpus (issue 44): the committed file's properties, its loader, and the script
that prepares it, played on a small tarball made here (nothing is downloaded)."""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path

import pytest
from script_loader import load_script

from course_utils.lab import corpus_zh
from course_utils.lab.corpus_zh import TANG_POEMS_PATH, load_tang_poems

prep = load_script("scripts/prepare_zh_corpus.py")
FOLDER = TANG_POEMS_PATH.parent
# Traditional characters that OpenCC's t2s always simplifies: none may be left.
TRADITIONAL = "國們說無風雲門馬長東書龍鳥見時與來為學歲"


@pytest.fixture(scope="module")
def text() -> str:
    return TANG_POEMS_PATH.read_text(encoding="utf-8")


def test_the_committed_corpus_is_a_few_megabytes_of_chinese(text):
    size = TANG_POEMS_PATH.stat().st_size
    facts = prep.facts(text)
    assert 1_000_000 <= size <= 3_000_000, f"{size:,} bytes"
    assert facts["characters"] >= 500_000
    assert 3_000 <= facts["distinct characters V"] <= 9_000
    assert facts["CJK share"] >= 0.8
    left = sorted(set(TRADITIONAL) & set(text))
    assert not left, f"traditional characters left: {left}"


def test_every_paragraph_is_a_title_then_couplets_of_one_length(text):
    assert text.endswith("\n") and not text.endswith("\n\n") and "\r" not in text
    poems = text[:-1].split("\n\n")
    wrong = []
    for poem in poems:
        title, *couplets = poem.split("\n")
        regular = len(couplets) in (2, 4) and len({len(c) for c in couplets}) == 1
        if not (prep.TITLE.match(title) and regular and all(map(prep.COUPLET.match, couplets))):
            wrong.append(poem)
    assert not wrong, f"{len(wrong)} poems out of format, e.g. {wrong[:2]}"
    bodies = [poem.split("\n", 1)[1] for poem in poems]
    assert len(set(bodies)) == len(bodies), "a verse appears twice"
    digests = [hashlib.sha256(poem.encode("utf-8")).hexdigest() for poem in poems]
    assert digests == sorted(digests), "the poems are not in the SHA-256 order the script uses"


def test_the_source_note_states_the_licence_and_the_files_facts(text):
    note = (FOLDER / "SOURCE.md").read_text(encoding="utf-8")
    assert "`chinese-poetry` 2.0.1" in note and "licence MIT" in note
    assert "scripts/prepare_zh_corpus.py" in note and "OpenCC" in note
    assert "MIT License" in (FOLDER / "LICENSE").read_text(encoding="utf-8")
    stated = dict(re.findall(r"^- ([\w ]+): ([\d,.]+)$", note, re.M))
    measured = {"poems": text.count("\n\n") + 1, **prep.facts(text)}
    for name, value in measured.items():
        written = float(stated[name].replace(",", ""))
        assert written == pytest.approx(value, abs=5e-4), (name, written, value)


def test_load_tang_poems_returns_the_file_and_checks_max_chars(text, monkeypatch, tmp_path):
    assert load_tang_poems() == text
    assert load_tang_poems(max_chars=40) == text[:40]
    with pytest.raises(TypeError, match=r"max_chars must be an int.*int\(10000.0\)"):
        load_tang_poems(1e4)
    with pytest.raises(ValueError, match="max_chars must be at least 1"):
        load_tang_poems(0)
    monkeypatch.setattr(corpus_zh, "TANG_POEMS_PATH", tmp_path / "absent.txt")
    with pytest.raises(FileNotFoundError, match="absent.txt.*prepare_zh_corpus.py"):
        load_tang_poems()


# --- the script, on a tarball made here ---------------------------------------------------


def _records() -> list[dict]:
    def poem(title, *lines):
        return {"author": "某", "title": title, "paragraphs": list(lines)}

    quatrain = ["床前明月光，疑是地上霜。", "举头望明月，低头思故乡。"]
    return [
        poem("静夜思", *quatrain),
        poem("重出", *quatrain),  # the same verse again: dropped
        poem("登鹳雀楼", "白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼。"),
        poem("三句", "白日依山尽，黄河入海流。"),  # one couplet: dropped
        poem("杂", "白日依山尽，黄河入海流。", "欲穷千里目，更上一层楼也。"),  # uneven: dropped
        poem("早发白帝城", "朝辞白帝彩云间，千里江陵一日还。", "两岸猿声啼不住，轻舟已过万重山。"),
        poem("缺字", "白日依山□，黄河入海流。", "欲穷千里目，更上一层楼。"),  # a gap: dropped
    ]


def _tarball(path: Path, version: str = "2.0.1") -> Path:
    files = {
        "package/package.json": {"name": "chinese-poetry", "version": version, "license": "MIT"},
        "package/dist/quantangshi/poet.tang.1000.json": _records()[4:],
        "package/dist/quantangshi/poet.tang.0.json": _records()[:4],
        "package/dist/quantangshi/poet.song.0.json": _records(),  # Song poems: not read
    }
    with tarfile.open(path, "w:gz") as archive:
        for name, content in [*files.items(), ("package/LICENSE", "The MIT License (MIT)\n")]:
            data = (content if isinstance(content, str) else json.dumps(content)).encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def identity(text: str) -> str:
    return text


def test_the_script_keeps_regulated_verse_once_in_a_fixed_order(tmp_path):
    tarball = _tarball(tmp_path / "p.tgz")
    facts = prep.prepare(tarball, tmp_path / "a", 10_000, convert=identity)
    text = (tmp_path / "a" / prep.CORPUS_FILE).read_text(encoding="utf-8")
    poems = text[:-1].split("\n\n")
    titles = [poem.split("\n")[0] for poem in poems]
    assert sorted(titles) == ["早发白帝城", "登鹳雀楼", "静夜思"] and facts["poems"] == 3
    digests = [hashlib.sha256(poem.encode("utf-8")).hexdigest() for poem in poems]
    assert digests == sorted(digests)
    note = (tmp_path / "a" / "SOURCE.md").read_text(encoding="utf-8")
    assert "1 the same verse as an earlier record" in note and "3 not a regulated" in note
    assert "2 quatrains of 5-character lines; 1 quatrains of 7-character lines" in note
    prep.prepare(tarball, tmp_path / "b", 10_000, convert=identity)
    for name in (prep.CORPUS_FILE, "LICENSE", "SOURCE.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_the_script_stops_at_the_byte_budget(tmp_path):
    records = prep.read_package(_tarball(tmp_path / "p.tgz"))[2]
    everything = prep.corpus_text(prep.select_poems(records, identity, 10**6)[0])
    assert len(
        prep.corpus_text(prep.select_poems(records, identity, len(everything.encode()))[0])
    ) == len(everything)
    budget = len(everything.encode()) - 1  # one byte short: the last poem goes
    poems, dropped = prep.select_poems(records, identity, budget)
    assert len(poems) == 2 and dropped["beyond --max-bytes"] == 1
    assert len(prep.corpus_text(poems).encode()) <= budget


def test_the_script_refuses_another_version_of_the_package(tmp_path):
    with pytest.raises(
        ValueError, match=r"chinese-poetry@2\.0\.0, expected chinese-poetry@2\.0\.1"
    ):
        prep.read_package(_tarball(tmp_path / "old.tgz", version="2.0.0"))


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--max-bytes", "5"], "--max-bytes 5 is outside [10000, 20000000]"),
        (["--max-bytes", "3e6"], "argument --max-bytes: invalid int value: '3e6'"),
        (["--tarball", "absent.tgz"], "--tarball absent.tgz is not a file"),
        (["--out", "no/such/folder"], "--out no/such/folder: its parent folder does not exist"),
        (["--nope"], "unrecognized arguments: --nope"),
    ],
)
def test_the_script_checks_its_arguments_first(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        prep.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and err.count("\n") == 1, err


def test_the_script_says_how_to_install_opencc(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(prep, "_opencc_version", lambda: None)
    with pytest.raises(SystemExit) as stop:
        prep.main(["--tarball", str(_tarball(tmp_path / "p.tgz"))])
    assert stop.value.code == 2 and "pip install opencc==1.4.2" in capsys.readouterr().err


def test_the_readme_states_the_corpus_facts(text):
    section = (prep.ROOT / "README.md").read_text(encoding="utf-8").split("## 中文版", 1)[1]
    facts = {"poems": text.count("\n\n") + 1, **prep.facts(text)}
    assert f"{facts['poems']:,} Tang regulated poems" in section
    assert f"{facts['characters']:,} characters" in section
    assert f"V = {facts['distinct characters V']:,} distinct" in section
    assert f"ln V = {facts['ln V']:.3f} nats" in section
