"""The Chinese edition's machinery (issue 44): gettext catalogues tied to the English cells, the
Chinese notebooks built from them, and the checks that keep the two editions in step.

Nothing of the course is translated yet; a small English notebook made here, with a tiny
Chinese demonstration catalogue, shows that every check can fail.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import polib
import pytest
from script_loader import load_script

tr = load_script("scripts/translations.py")
tt = tr.texts  # scripts/translation_texts.py, as translations.py imports it

CODE = """# Count the characters of the text
text = "hello world"  # the sample
vocab = sorted(set(text))
device = torch.device("cpu")
print(f"{len(vocab)} distinct characters in {len(text)} characters")
plt.plot([1, 2], label="loss per step")
"""
INTRO = "# 01 · Tokens\n\nA **token** is a piece of text with an id."
BADGE = (
    "[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
    "(https://colab.research.google.com/github/someone/course/blob/main/notebooks/01_tokens.ipynb)"
)
# The demonstration: English -> Chinese, with the f-string's fields in Chinese word order.
CHINESE = {
    INTRO: "# 01 · 词元\n\n**词元**（token）是带有编号（id）的一小段文本。",
    "# Count the characters of the text": "# 数一数文本中的字符",
    "# the sample": "# 示例文本",
    'f"{len(vocab)} distinct characters in {len(text)} characters"': (
        'f"共 {len(text)} 个字符，其中不同的字符 {len(vocab)} 个"'
    ),
    '"loss per step"': '"每步的损失"',
}


def _notebook(folder: Path, name: str, cells: list[tuple[str, str, str]]) -> Path:
    """Write ``folder/name`` with cells ``(id, type, source)``; code cells with an output."""
    notebook = nbformat.v4.new_notebook()
    for cell_id, kind, source in cells:
        if kind == "code":
            cell = nbformat.v4.new_code_cell(source, id=cell_id, execution_count=1)
            cell.outputs = [nbformat.v4.new_output("stream", text="9 distinct characters\n")]
        else:
            cell = nbformat.v4.new_markdown_cell(source, id=cell_id)
        notebook.cells.append(cell)
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, folder / name)
    return folder / name


ENGLISH = [
    ("intro", "markdown", INTRO),
    ("colab-badge", "markdown", BADGE),
    ("count", "code", CODE),
]


def _translate(catalogue: Path, table: dict[str, str]) -> None:
    po = polib.pofile(str(catalogue))
    for entry in po:
        if entry.msgid in table:
            entry.msgstr = table[entry.msgid]
    po.save()


@pytest.fixture
def edition(tmp_path):
    """An English notebook, its catalogue with the demonstration translated, the folders."""
    english, catalogues = tmp_path / "notebooks", tmp_path / "translations"
    notebook = _notebook(english, "01_tokens.ipynb", ENGLISH)
    tr.update([notebook], catalogues)
    _translate(catalogues / "01_tokens.po", CHINESE)
    return notebook, catalogues, tmp_path / "zh"


# --- the texts of a code cell -----------------------------------------------------------------


def test_a_code_cell_gives_its_comments_and_printed_texts_not_its_data():
    found = [tt.span_text(CODE, span) for span in tt.code_spans(CODE)]
    assert found == list(CHINESE)[1:]  # not "hello world" (data), not "cpu" (code)


def test_comment_runs_are_one_text_and_markers_are_code():
    source = (
        "def f(x):\n"
        '    """Double x."""\n'
        "    # first line\n"
        "    # second line\n"
        "    return 2 * x  # NBVAL_IGNORE_OUTPUT\n"
        "%time f(1)\n"
        "raise ValueError(f'x must be positive, got {x}')\n"
    )
    found = [(s.kind, tt.span_text(source, s)) for s in tt.code_spans(source)]
    assert found == [
        ("string", '"""Double x."""'),
        ("comment", "# first line\n# second line"),
        ("string", "f'x must be positive, got {x}'"),
    ]
    translated = tt.replace_texts(
        source, {"# first line\n# second line": "# 第一行\n# 第二行\n# 第三行"}
    )
    assert "    # 第一行\n    # 第二行\n    # 第三行\n    return" in translated
    assert tt.code_skeleton(translated) == tt.code_skeleton(source)


@pytest.mark.parametrize(
    ("chinese", "same"),
    [
        (CODE.replace("the sample", "示例"), True),  # a comment
        (CODE.replace('"loss per step"', '"每步的损失"'), True),  # a label
        (CODE.replace("distinct characters in", "个不同字符，共"), True),  # f-string words
        (
            CODE.replace(
                'f"{len(vocab)} distinct characters in {len(text)}', 'f"{len(text)} 中 {len(vocab)}'
            ),
            True,
        ),
        (CODE.replace('"cpu"', '"CPU"'), False),  # code, not text
        (CODE.replace('"hello world"', '"你好"'), False),  # data, not text
        (CODE.replace("{len(text)} characters", "characters"), False),  # a field lost
        (CODE.replace("sorted(set(text))", "set(text)"), False),  # other code
    ],
)
def test_the_code_skeleton_sets_aside_only_words(chinese, same):
    assert (tt.code_skeleton(chinese) == tt.code_skeleton(CODE)) is same


@pytest.mark.parametrize(
    ("msgid", "msgstr", "said"),
    [
        ("# the sample", "示例文本", "comment lines each starting with '#'"),
        ("# the sample", "# 示例\n# 文本", "an end-of-line comment: one line"),
        ('"loss per step"', "每步的损失", "one string literal with its quotes"),
        ('"loss per step"', '"每步" + x', "one string literal with its quotes"),
    ],
)
def test_a_translation_that_cannot_stand_in_the_code_is_refused(msgid, msgstr, said):
    with pytest.raises(ValueError, match=said):
        tt.replace_texts(CODE, {msgid: msgstr})


# --- catalogues, the built notebook, the checks --------------------------------------------------


def test_the_catalogue_ties_each_text_to_its_notebook_and_cell(edition):
    notebook, catalogues, _ = edition
    po = polib.pofile(str(catalogues / "01_tokens.po"))
    assert [(e.msgctxt, e.msgid) for e in po] == [("01_tokens#intro", INTRO)] + [
        ("01_tokens#count", msgid) for msgid in list(CHINESE)[1:]
    ]  # the badge cell is a link, not text
    assert po.metadata["Language"] == "zh_CN" and len(po.translated_entries()) == len(CHINESE)


def test_the_built_chinese_notebook_has_the_english_code_in_chinese_words(edition):
    notebook, catalogues, out = edition
    assert tr.build(notebook, catalogues / "01_tokens.po", out / notebook.name) == (5, 5)
    built = nbformat.read(out / notebook.name, as_version=4)
    nbformat.validate(built)
    intro, badge, code = built.cells
    assert intro.source == CHINESE[INTRO]
    assert badge.source == BADGE.replace("/notebooks/01_tokens", "/notebooks/zh/01_tokens")
    assert "# 数一数文本中的字符\n" in code.source and '"hello world"  # 示例文本' in code.source
    assert code.outputs == [] and code.execution_count is None  # outputs come from running it
    assert tr.code_differences(notebook, out / notebook.name) == []


def test_the_code_comparison_names_a_cell_whose_code_changed(edition):
    notebook, catalogues, out = edition
    tr.build(notebook, catalogues / "01_tokens.po", out / notebook.name)
    built = json.loads((out / notebook.name).read_text(encoding="utf-8"))
    built["cells"][2]["source"] = "".join(built["cells"][2]["source"]).replace("sorted(", "list(")
    (out / notebook.name).write_text(json.dumps(built), encoding="utf-8")
    assert tr.code_differences(notebook, out / notebook.name) == [
        "01_tokens.ipynb cell count: its code is not the English code"
    ]
    built["cells"].pop(0)
    (out / notebook.name).write_text(json.dumps(built), encoding="utf-8")
    assert (
        "its cells (ids, types) are not those"
        in tr.code_differences(notebook, out / notebook.name)[0]
    )


def test_a_translated_code_string_is_refused_at_build_time(edition):
    notebook, catalogues, out = edition
    _translate(catalogues / "01_tokens.po", {'"loss per step"': 'f"{device}"'})
    with pytest.raises(ValueError, match="01_tokens.ipynb cell count: the translated code differs"):
        tr.build(notebook, catalogues / "01_tokens.po", out / notebook.name)


def test_a_changed_english_text_names_its_chinese_text_out_of_date(edition):
    notebook, catalogues, out = edition
    assert tr.out_of_date([notebook], catalogues) == []
    changed = [
        ("intro", "markdown", INTRO.replace("with an id", "with an integer id")),
        ("colab-badge", "markdown", BADGE),
        ("count", "code", CODE.replace("# the sample", "# the sample text")),
    ]
    _notebook(notebook.parent, notebook.name, changed)
    stale = tr.out_of_date([notebook], catalogues)
    assert len(stale) == 2, stale
    assert "01_tokens#intro: its English is no longer in that cell" in stale[0]
    assert "English: '# 01 · Tokens A **token** is a piece of text with an id.'" in stale[0]
    assert "01_tokens#count" in stale[1] and "English: '# the sample'" in stale[1]
    # update carries both over as fuzzy (still named), with the old English beside them
    counts = tr.update([notebook], catalogues)
    assert counts == {"entries": 5, "translated": 3, "fuzzy": 2, "obsolete": 0}
    fuzzy = {e.msgid: e for e in polib.pofile(str(catalogues / "01_tokens.po")).fuzzy_entries()}
    assert fuzzy["# the sample text"].previous_msgid == "# the sample"
    assert fuzzy["# the sample text"].msgstr == "# 示例文本"
    assert len(tr.out_of_date([notebook], catalogues)) == 2
    tr.build(notebook, catalogues / "01_tokens.po", out / notebook.name)  # fuzzy: English kept
    built = nbformat.read(out / notebook.name, as_version=4)
    assert built.cells[0].source == changed[0][2] and "# the sample text" in built.cells[2].source
    po = polib.pofile(str(catalogues / "01_tokens.po"))  # the translator checks and confirms
    for entry in po.fuzzy_entries():
        entry.flags.remove("fuzzy")
    po.save()
    assert tr.out_of_date([notebook], catalogues) == []


def test_a_deleted_cell_leaves_its_translations_obsolete_and_not_out_of_date(edition):
    notebook, catalogues, _ = edition
    _notebook(notebook.parent, notebook.name, ENGLISH[:2])
    assert tr.update([notebook], catalogues) == {
        "entries": 1,
        "translated": 1,
        "fuzzy": 0,
        "obsolete": 4,
    }
    assert tr.out_of_date([notebook], catalogues) == []
    _notebook(notebook.parent, notebook.name, ENGLISH)  # the cell comes back: so do they
    assert tr.update([notebook], catalogues)["translated"] == 5


def test_a_translation_follows_its_cell_to_another_notebook(edition):
    notebook, catalogues, _ = edition
    other = _notebook(notebook.parent, "02_more.ipynb", [ENGLISH[2]])
    _notebook(notebook.parent, notebook.name, ENGLISH[:2])
    stale = tr.out_of_date([notebook, other], catalogues)  # moved, not yet updated: named
    assert len(stale) == 4 and all("01_tokens#count: its English is no longer" in s for s in stale)
    notebook.unlink()
    assert any(
        "notebook 01_tokens.ipynb is gone" in line for line in tr.out_of_date([other], catalogues)
    )
    tr.update([other], catalogues)
    moved = polib.pofile(str(catalogues / "02_more.po"))
    assert len(moved.translated_entries()) == 4 and moved[0].msgctxt == "02_more#count"
    assert tr.out_of_date([other], catalogues) == []
    assert [e.msgid for e in polib.pofile(str(catalogues / "01_tokens.po"))] == [INTRO]  # obsolete


def test_the_command_line_updates_builds_and_checks(edition, capsys):
    notebook, catalogues, out = edition
    folders = ["--notebooks", str(notebook.parent), "--catalogues", str(catalogues)]
    assert tr.main(["build", *folders, "--out", str(out)]) == 0
    assert "01_tokens.ipynb: 5 of 5 texts translated" in capsys.readouterr().out
    assert tr.main(["check", *folders]) == 0
    _notebook(
        notebook.parent, notebook.name, [ENGLISH[0], ("count", "code", CODE.replace("sample", "x"))]
    )
    assert tr.main(["check", *folders]) == 1
    assert "1 Chinese texts out of date" in capsys.readouterr().out
    assert tr.main(["update", *folders]) == 0
    assert "5 entries, 4 translated, 1 fuzzy, 0 obsolete" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["translate"], "argument command: invalid choice: 'translate'"),
        (["check", "--all"], "--all is an option of build, not of check"),
        (["update", "--notebooks", "nowhere"], "--notebooks nowhere holds no NN_name.ipynb"),
        (["build", "--out", "notebooks"], "--out notebooks is the English folder"),
    ],
)
def test_the_command_line_checks_its_arguments_first(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        tr.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and err.count("\n") == 1, err


# --- the course itself ----------------------------------------------------------------------------


def test_no_chinese_text_of_the_course_is_out_of_date():
    stale = tr.out_of_date(tr.english_notebooks(), tr.CATALOGUES)
    assert not stale, "\n".join(stale)


@pytest.mark.tooling  # rebuilds all 17 notebooks (4 s): CI runs it, make test keeps under 5 minutes
def test_every_chinese_notebook_runs_the_english_code_and_is_built_from_the_catalogues(tmp_path):
    for chinese in sorted(tr.EDITION.glob("*.ipynb")):
        english = tr.NOTEBOOKS / chinese.name
        assert english.is_file(), f"{chinese} has no English notebook"
        assert tr.code_differences(english, chinese) == []
        tr.build(english, tr.CATALOGUES / f"{english.stem}.po", tmp_path / chinese.name)
        sources = [
            [c["source"] for c in json.loads(p.read_text(encoding="utf-8"))["cells"]]
            for p in (chinese, tmp_path / chinese.name)
        ]
        assert sources[0] == sources[1], f"{chinese} is not current: run make translations"


def test_a_translated_string_may_wrap_over_lines_as_in_its_call():
    """A string literal in a call may wrap over lines (implicit concatenation in the call's
    parentheses); its translation may too, without a backslash."""
    source = 'print("one long sentence "\n      "that wraps")\n'
    (span,) = [s for s in tt.code_spans(source) if s.kind != "comment"]
    msgid = tt.span_text(source, span)
    tt.check_translation(span, msgid, '"一个很长的句子，"\n      "换了一行"')
    with pytest.raises(ValueError, match="must be one string literal"):
        tt.check_translation(span, msgid, '"一个句子" + x')


def test_only_a_notebook_whose_texts_are_all_translated_is_built(edition, capsys):
    """A catalogue with some texts translated (a setup cell shared by every notebook, say)
    builds no Chinese notebook; the whole notebook translated does; --all builds every one."""
    notebook, catalogues, out = edition
    folders = ["--notebooks", str(notebook.parent), "--catalogues", str(catalogues)]
    po = polib.pofile(str(catalogues / "01_tokens.po"))
    po[0].msgstr = ""  # the intro untranslated
    po.save()
    assert tr.main(["build", *folders, "--out", str(out)]) == 0
    assert not (out / notebook.name).exists() and "wrote" not in capsys.readouterr().out
    assert tr.main(["build", *folders, "--out", str(out), "--all"]) == 0
    assert "01_tokens.ipynb: 4 of 5 texts translated" in capsys.readouterr().out


def test_a_rebuild_that_changes_no_cell_keeps_the_executed_outputs(edition):
    """build rewrites a Chinese notebook only when a cell would change: its executed outputs
    (make course) survive make translations; a changed translation rebuilds it, outputs cleared."""
    notebook, catalogues, out = edition
    built = out / notebook.name
    tr.build(notebook, catalogues / "01_tokens.po", built)
    executed = json.loads(built.read_text(encoding="utf-8"))
    code = next(c for c in executed["cells"] if c["cell_type"] == "code")
    code["outputs"] = [nbformat.v4.new_output("stream", text="9 个不同的字符\n")]
    built.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tr.build(notebook, catalogues / "01_tokens.po", built)
    assert json.loads(built.read_text(encoding="utf-8")) == json.loads(json.dumps(executed))
    _translate(catalogues / "01_tokens.po", {"# the sample": "# 样例文本"})
    tr.build(notebook, catalogues / "01_tokens.po", built)
    code = next(c for c in json.loads(built.read_text())["cells"] if c["cell_type"] == "code")
    assert code["outputs"] == [] and "# 样例文本" in "".join(code["source"])


def test_a_rebuild_that_changes_markdown_only_keeps_the_executed_outputs(edition):
    """A retranslated paragraph leaves every code cell as it ran: its outputs stay, so the
    Chinese notebook needs no new run (its code would print the same)."""
    notebook, catalogues, out = edition
    built = out / notebook.name
    tr.build(notebook, catalogues / "01_tokens.po", built)
    executed = json.loads(built.read_text(encoding="utf-8"))
    code = next(c for c in executed["cells"] if c["cell_type"] == "code")
    code["outputs"], code["execution_count"] = [nbformat.v4.new_output("stream", text="9\n")], 1
    built.write_text(json.dumps(executed, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    _translate(catalogues / "01_tokens.po", {INTRO: "# 01 · 词元（重译）"})
    tr.build(notebook, catalogues / "01_tokens.po", built)
    rebuilt = json.loads(built.read_text(encoding="utf-8"))
    assert "# 01 · 词元（重译）" in "".join(rebuilt["cells"][0]["source"])
    code = next(c for c in rebuilt["cells"] if c["cell_type"] == "code")
    assert code["outputs"][0]["text"] == "9\n" and code["execution_count"] == 1


def test_a_cell_id_shared_by_two_notebooks_lends_no_fuzzy_translation(tmp_path):
    """Ids such as cell-03 recur across notebooks: another notebook's cell-03 is no old version
    of this one's. The same comment translated in 13's cell-03 fills 09's (same words), and
    09's other comment stays untranslated, not fuzzy, at every later update (it was fuzzy
    from the second update on, and make translations then failed its check)."""
    english, catalogues = tmp_path / "notebooks", tmp_path / "translations"
    first = _notebook(english, "13_a.ipynb", [("cell-03", "code", "x = 1  # (B, T)\n")])
    source = "ids = 1  # (B, T)\nx = 2  # (B, T) -> (B, T, C)\n"
    second = _notebook(english, "09_b.ipynb", [("cell-03", "code", source)])
    tr.update([first, second], catalogues)
    _translate(catalogues / "13_a.po", {"# (B, T)": "# (B, T)"})
    for _ in range(3):
        counts = tr.update([first, second], catalogues)
        assert counts == {"entries": 3, "translated": 2, "fuzzy": 0, "obsolete": 0}, counts
        assert tr.out_of_date([first, second], catalogues) == []


def test_the_corpus_keyword_is_the_editions_one_choice_in_code():
    """Notebook 12 names its corpus in a ``corpus=`` literal: a text of the catalogue (the
    Chinese edition says "tang_poems"), set aside when the two editions' code is compared."""
    source = 'data = corpus_data(corpus="shakespeare")  # its characters\nx = f(label_size="no")\n'
    found = [tt.span_text(source, span) for span in tt.code_spans(source)]
    assert found == ['"shakespeare"', "# its characters"]
    chinese = source.replace('"shakespeare"', '"tang_poems"').replace("its characters", "它的字符")
    assert tt.code_skeleton(chinese) == tt.code_skeleton(source)
    assert tt.code_skeleton(source.replace("corpus_data", "load")) != tt.code_skeleton(source)


# --- the README: one more source, README.zh.md its Chinese edition --------------------------------

tr_readme = tr.readme  # scripts/translation_readme.py, as translations.py imports it
FENCE = "```bash\nmake lab    # open the lab on your copies\nmake test\n```\n"
README = (
    "# A small course\n\n"
    "Two notebooks: [tokens](notebooks/01_tokens.ipynb) and\n[more](notebooks/02_more.ipynb).\n\n"
    f"## Quick start\n\n{FENCE}\nBoth commands are idempotent.\n\n"
    "| # | notebook |\n|---|---|\n| 01 | [tokens](notebooks/01_tokens.ipynb) |\n\n"
    "## 中文版: the Chinese edition\n\n- one catalogue per notebook;\n- the README too.\n"
)
README_ZH = {
    "# A small course": "# 一门小课程",
    "Two notebooks: [tokens](notebooks/01_tokens.ipynb) and\n[more](notebooks/02_more.ipynb).": (
        "两个 notebook：[词元](notebooks/01_tokens.ipynb)和\n[更多](notebooks/02_more.ipynb)。"
    ),
    "## Quick start": "## 快速开始",
    "Both commands are idempotent.": "两条命令都是幂等的。",
    "| # | notebook |\n|---|---|\n| 01 | [tokens](notebooks/01_tokens.ipynb) |": (
        "| # | notebook |\n|---|---|\n| 01 | [词元](notebooks/01_tokens.ipynb) |"
    ),
    "## 中文版: the Chinese edition": "## 中文版",
    "- one catalogue per notebook;\n- the README too.": (
        "- 每个 notebook 一个翻译目录；\n- README 也是。"
    ),
}


@pytest.fixture
def readme_edition(tmp_path):
    """A README beside a notebooks folder, its catalogue made and translated whole; returns
    the command line's folder arguments and the paths."""
    notebooks, catalogues = tmp_path / "notebooks", tmp_path / "translations"
    _notebook(notebooks, "01_tokens.ipynb", ENGLISH)
    (tmp_path / "README.md").write_text(README, encoding="utf-8")
    folders = ["--notebooks", str(notebooks), "--catalogues", str(catalogues)]
    assert tr.main(["update", "--only", "README", *folders]) == 0
    _translate(catalogues / "README.po", README_ZH)
    return folders, tmp_path / "README.md", catalogues / "README.po", tmp_path / "README.zh.md"


def test_a_readme_block_becomes_an_entry_with_its_section(readme_edition):
    folders, readme, catalogue, _ = readme_edition
    po = polib.pofile(str(catalogue))
    assert [(e.msgctxt, e.msgid) for e in po] == [
        (f"README#{section}", msgid)
        for section, msgid in zip(
            ["a-small-course"] * 2 + ["quick-start"] * 3 + ["中文版-the-chinese-edition"] * 2,
            README_ZH,
        )
    ]  # the fenced block is no entry: commands stay as they are
    assert [e.comment for e in po][2:5] == [
        "heading in README section quick-start",
        "paragraph in README section quick-start",
        "table in README section quick-start",
    ]
    assert not any("make lab" in e.msgid for e in po)
    assert "".join(p.source for p in tr_readme.pieces(README)) == README  # nothing lost
    assert not (readme.parent / "translations" / "01_tokens.po").exists()  # --only README


def test_a_list_parted_by_blank_lines_is_one_block_and_a_repeated_heading_its_own_section():
    found = tr_readme.pieces("## Notes\n\n- one\n\n- two\n  wrapped\n\ntext\n\n## Notes\n\nx\n")
    assert [(p.kind, p.section) for p in found if p.kind != "blank"] == [
        ("heading", "notes"),
        ("list", "notes"),
        ("paragraph", "notes"),
        ("heading", "notes-1"),
        ("paragraph", "notes-1"),
    ]
    assert found[2].msgid == "- one\n\n- two\n  wrapped"


def test_a_changed_readme_block_is_named_out_of_date(readme_edition, capsys):
    folders, readme, catalogue, _ = readme_edition
    assert tr_readme.readme_out_of_date(readme, catalogue.parent) == []
    readme.write_text(
        README.replace("are idempotent", "are idempotent and quick")
        .replace("- the README too.\n", "")
        .replace("## Quick start", "## Quick start, in two commands"),
        encoding="utf-8",
    )
    stale = tr_readme.readme_out_of_date(readme, catalogue.parent)
    assert len(stale) == 4, stale  # the renamed section's 3 blocks, and the changed list
    assert "README.po README#quick-start: its English is no longer in that section" in stale[1]
    assert "English: 'Both commands are idempotent.'" in stale[1]
    assert tr.main(["check", *folders]) == 1
    assert "4 Chinese texts out of date" in capsys.readouterr().out
    po = tr_readme.update_readme(readme, catalogue.parent)
    fuzzy = {e.msgid: e for e in po.fuzzy_entries()}
    assert set(fuzzy) == {
        "## Quick start, in two commands",
        "Both commands are idempotent and quick.",
        "- one catalogue per notebook;",
    }  # the table, its English unchanged, keeps its translation in the renamed section
    assert fuzzy["Both commands are idempotent and quick."].previous_msgid == (
        "Both commands are idempotent."
    )
    assert fuzzy["Both commands are idempotent and quick."].msgstr == "两条命令都是幂等的。"
    assert fuzzy["Both commands are idempotent and quick."].msgctxt == (
        "README#quick-start-in-two-commands"
    )
    assert len(tr_readme.readme_out_of_date(readme, catalogue.parent)) == 3  # fuzzy: named
    for entry in po.fuzzy_entries():
        entry.flags.remove("fuzzy")
    po.save()
    assert tr_readme.readme_out_of_date(readme, catalogue.parent) == []


def test_a_vanished_readme_block_becomes_obsolete_and_comes_back(readme_edition):
    folders, readme, catalogue, _ = readme_edition
    readme.write_text(README.replace("Both commands are idempotent.\n\n", ""), encoding="utf-8")
    po = tr_readme.update_readme(readme, catalogue.parent)
    assert [e.msgid for e in po.obsolete_entries()] == ["Both commands are idempotent."]
    assert not po.fuzzy_entries() and tr_readme.readme_out_of_date(readme, catalogue.parent) == []
    readme.write_text(README, encoding="utf-8")
    po = tr_readme.update_readme(readme, catalogue.parent)
    assert len(po.translated_entries()) == len(README_ZH) and not po.obsolete_entries()


def test_a_block_rewritten_in_place_inherits_its_old_translation_as_fuzzy(readme_edition):
    """However little alike, the one new block of a section where one block of its kind
    vanished is that block rewritten: its translation comes along, fuzzy, old English beside."""
    folders, readme, catalogue, _ = readme_edition
    rewritten = "Run them again at will: nothing is redone."
    readme.write_text(README.replace("Both commands are idempotent.", rewritten), encoding="utf-8")
    po = tr_readme.update_readme(readme, catalogue.parent)
    (fuzzy,) = po.fuzzy_entries()
    assert (fuzzy.msgid, fuzzy.msgstr) == (rewritten, "两条命令都是幂等的。")
    assert fuzzy.previous_msgid == "Both commands are idempotent." and not po.obsolete_entries()


def test_build_writes_readme_zh_only_when_every_block_is_translated(readme_edition, capsys):
    folders, readme, catalogue, chinese = readme_edition
    po = polib.pofile(str(catalogue))
    po[3].flags.append("fuzzy")  # "Both commands are idempotent." to be checked again
    po.save()
    assert tr.main(["build", *folders]) == 0
    assert not chinese.exists() and "README.zh.md" not in capsys.readouterr().out
    assert tr.main(["build", *folders, "--all"]) == 0
    assert f"{chinese}: 6 of 7 blocks translated" in capsys.readouterr().out
    assert "Both commands are idempotent." in chinese.read_text(encoding="utf-8")  # English kept
    po[3].flags.remove("fuzzy")
    po.save()
    assert tr.main(["build", *folders]) == 0
    assert f"{chinese}: 7 of 7 blocks translated" in capsys.readouterr().out
    text = chinese.read_text(encoding="utf-8")
    assert text.startswith("# 一门小课程\n\n两个 notebook：") and "两条命令都是幂等的。\n" in text
    assert text.endswith("## 中文版\n\n- 每个 notebook 一个翻译目录；\n- README 也是。\n")


def test_fenced_code_stays_as_is_in_the_chinese_readme(readme_edition):
    folders, readme, catalogue, chinese = readme_edition
    po = polib.pofile(str(catalogue))
    fence = FENCE.strip()
    po.append(polib.POEntry(msgctxt="README#quick-start", msgid=fence, msgstr="```\n改\n```"))
    po.save()  # even a translation of the fence's text is not used
    assert tr.main(["build", *folders]) == 0
    text = chinese.read_text(encoding="utf-8")
    assert f"## 快速开始\n\n{FENCE}\n两条命令都是幂等的。\n" in text
    assert "改" not in text


def test_a_notebook_link_points_into_zh_only_where_that_notebook_exists(readme_edition):
    folders, readme, catalogue, chinese = readme_edition
    _notebook(readme.parent / "notebooks" / "zh", "01_tokens.ipynb", ENGLISH)  # a Chinese 01
    assert tr.main(["build", *folders]) == 0
    text = chinese.read_text(encoding="utf-8")
    assert "[词元](notebooks/zh/01_tokens.ipynb)和\n[更多](notebooks/02_more.ipynb)" in text
    assert "| 01 | [词元](notebooks/zh/01_tokens.ipynb) |" in text
    assert "notebooks/zh/02_more" not in text and "notebooks/01_tokens" not in text
    preview = readme.parent / "preview"  # build --out elsewhere: the README goes there too
    _notebook(preview, "01_tokens.ipynb", ENGLISH)
    before = chinese.read_text(encoding="utf-8")
    assert tr.main(["build", *folders, "--out", str(preview), "--only", "README"]) == 0
    assert chinese.read_text(encoding="utf-8") == before
    text = (preview / "README.zh.md").read_text(encoding="utf-8")
    assert "[词元](01_tokens.ipynb)和\n[更多](../notebooks/02_more.ipynb)" in text


def test_a_notebook_update_leaves_the_readme_catalogue_as_it_is(readme_edition, capsys):
    folders, readme, catalogue, _ = readme_edition
    before = catalogue.read_text(encoding="utf-8")
    assert tr.main(["update", "--only", "notebooks", *folders]) == 0
    assert catalogue.read_text(encoding="utf-8") == before
    assert (catalogue.parent / "01_tokens.po").is_file()
    assert tr.main(["update", *folders]) == 0  # both: the README's counts said
    assert "README.po: 7 entries, 7 translated, 0 fuzzy, 0 obsolete" in capsys.readouterr().out
    assert tr.out_of_date(tr.english_notebooks(readme.parent / "notebooks"), catalogue.parent) == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["update", "--readme", "nowhere.md"], "--readme nowhere.md is not a file"),
        (["check", "--only", "readme"], "argument --only: invalid choice: 'readme'"),
    ],
)
def test_the_command_line_checks_its_readme_arguments_first(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        tr.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and said in err and err.count("\n") == 1, err


def test_only_readme_needs_a_readme(tmp_path, capsys):
    _notebook(tmp_path / "notebooks", "01_tokens.ipynb", ENGLISH)
    with pytest.raises(SystemExit) as stop:
        tr.main(["update", "--only", "README", "--notebooks", str(tmp_path / "notebooks")])
    assert stop.value.code == 2 and "--only README: there is no" in capsys.readouterr().err


def test_no_chinese_readme_block_is_out_of_date_and_readme_zh_is_current():
    """The course's own README: every translated block still the English's, and README.zh.md
    what build makes of README.md and README.po (run make translations after a change)."""
    readme, catalogue = tr.ROOT / "README.md", tr.CATALOGUES / "README.po"
    stale = tr_readme.readme_out_of_date(readme, tr.CATALOGUES)
    assert not stale, "\n".join(stale)
    chinese = tr.ROOT / "README.zh.md"
    if chinese.is_file():
        assert tr_readme.readme_complete(readme, catalogue), "README.po lacks blocks of README.md"
        built, _, _ = tr_readme.chinese_readme(readme, catalogue, chinese, tr.NOTEBOOKS, tr.EDITION)
        assert built == chinese.read_text(encoding="utf-8"), (
            "README.zh.md is not current: run make translations"
        )
