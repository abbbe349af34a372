"""What course_utils prints, in the edition's language (issue 44): ``setup(language=...)``,
``tr`` and its compiled gettext catalogue, and the catalogue kept in step with the package."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polib
import pytest
import torch
from script_loader import load_script

from course_utils.exercises.core import compare, expect_error, run_check
from course_utils.lab import bootstrap, language

ROOT = Path(__file__).resolve().parents[1]
messages = load_script("scripts/translation_messages.py")
CATALOGUES = ROOT / "translations" / "zh"


@pytest.fixture
def speak(monkeypatch):
    """Switch course_utils's language for one test; English again afterwards."""
    monkeypatch.setenv(language.ENV, "en")
    yield language.set_language
    language.set_language("en")


def _not_done():
    raise NotImplementedError


def test_english_is_the_default_and_each_message_comes_back_unchanged(speak, capsys):
    speak("en")
    assert language.tr("✅ {title}: correct") == "✅ {title}: correct"
    assert not run_check("stable softmax", _not_done)
    assert capsys.readouterr().out == "❌ stable softmax: not implemented yet\n"


def test_the_chinese_edition_prints_the_checkers_verdicts_in_chinese(speak, capsys):
    speak("zh")
    assert not run_check("split_heads", _not_done)
    assert run_check("split_heads", lambda: None)
    assert capsys.readouterr().out == "❌ split_heads：尚未实现\n✅ split_heads：正确\n"
    problem = compare([1.0], torch.zeros(2), name="weights")
    assert problem == "weights 应是 torch.Tensor，实际是 list"
    with expect_error(ValueError):
        raise ValueError("d_model=7 is odd")  # the error itself stays English
    assert capsys.readouterr().out == "如预期抛出 ValueError：d_model=7 is odd\n"


def test_setup_refuses_a_language_the_course_is_not_written_in(speak):
    for wrong in ("fr", "zh-CN", "Chinese", ""):
        with pytest.raises(ValueError, match=rf"language={wrong!r} is not one of .*'en', 'zh'"):
            bootstrap.setup(language=wrong)
    assert language.current_language() == "en"


def test_setup_sets_the_language_and_a_started_process_inherits_it(speak, monkeypatch):
    monkeypatch.setattr(bootstrap, "in_colab", lambda: False)
    monkeypatch.setattr(bootstrap, "local_setup", lambda: [])
    bootstrap.setup(language="zh")
    assert language.current_language() == "zh"
    assert os.environ[language.ENV] == "zh"


def test_every_message_of_the_package_has_chinese_with_the_english_fields():
    """A new tr("...") without Chinese, a translation that lost a {field}, or a compiled file
    out of step with the catalogue is named (scripts/translations.py check does the same)."""
    assert messages.messages_out_of_date(CATALOGUES) == []
    assert len(messages.messages()) >= 14


def test_the_catalogue_check_names_a_missing_translation_and_a_lost_field(tmp_path):
    package = tmp_path / "course_utils"
    package.mkdir()
    (package / "a.py").write_text(
        "from course_utils.lab.language import tr, N_\n"
        'X = N_("head {h}")\n'
        'def f(loss):\n    return tr("loss {loss:.3f}").format(loss=loss)\n',
        encoding="utf-8",
    )
    folder = tmp_path / "zh"
    po = messages.update_messages(folder, package)
    assert [e.msgid for e in po] == ["head {h}", "loss {loss:.3f}"]
    where = [e.occurrences for e in po]
    assert where == [[("course_utils/a.py", "2")], [("course_utils/a.py", "4")]]
    stale = messages.messages_out_of_date(folder, package)
    assert len(stale) == 2 and all("has no Chinese" in line for line in stale)
    po[0].msgstr, po[1].msgstr = "头 {h}", "损失 {value:.3f}"
    po.save()
    (said,) = messages.messages_out_of_date(folder, package)
    assert "'loss {loss:.3f}': the Chinese has the fields ['value'], the English ['loss']" in said
    po[1].msgstr = "损失 {loss:.3f}"
    po.save()
    (said,) = messages.messages_out_of_date(folder, package)
    assert "out of step" in said  # not compiled yet
    assert messages.build_messages(folder, package) == (2, 2)
    assert messages.messages_out_of_date(folder, package) == []
    compiled = polib.mofile(str(messages.compiled_path(package)))
    assert {e.msgid: e.msgstr for e in compiled if e.msgid}["head {h}"] == "头 {h}"


@pytest.mark.parametrize("call", ['tr(f"loss {x}")', "tr(text)", 'tr("a", "b")', 'N_("a" + b)'])
def test_a_message_the_catalogue_cannot_hold_is_refused_with_its_place(tmp_path, call):
    package = tmp_path / "course_utils"
    package.mkdir()
    (package / "b.py").write_text(f"x = 1\ny = {call}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"course_utils/b.py:2: (tr|N_)\(\) takes one string"):
        messages.messages(package)


def test_a_message_marked_where_it_is_written_is_translated_where_it_is_shown(speak):
    marked = language.N_("✅ {title}: correct")
    assert marked == "✅ {title}: correct"
    speak("zh")
    assert language.translated(marked) == "✅ {title}：正确"
    assert language.translated("not in the catalogue") == "not in the catalogue"


@pytest.mark.parametrize("edition, said", [("", '"en"'), ("zh/", '"zh"')])
def test_each_editions_setup_cell_names_its_language(edition, said):
    for path in sorted((ROOT / "notebooks" / edition).glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        setup = next(c for c in cells if c["cell_type"] == "code")
        assert f"setup(language={said})" in "".join(setup["source"]), path.name


def test_a_chinese_value_meets_chinese_text_without_the_space_a_latin_one_keeps(speak):
    from course_utils.exercises.difference import difference

    speak("zh")
    shape = difference(torch.zeros(3), torch.zeros(2), name=language.N_("the result"))
    assert shape == "结果的形状是 (3,)，应为 (2)"  # the catalogue's "{name} 的形状…"
    assert difference(torch.zeros(3), torch.zeros(2), name="x") == "x 的形状是 (3,)，应为 (2)"
    listed = difference([1.0, 2.0], torch.zeros(2), name="x")
    assert listed.endswith("实际是含 2 个元素的 list（请用 torch.stack 或 torch.tensor）")


@pytest.mark.parametrize(
    "template, args, kwargs, chinese",
    [
        ("{a} 的 {b} 了", (), {"a": "甲", "b": "乙"}, "甲的乙了"),
        ("{a} 的 {b} 了", (), {"a": "x", "b": "y"}, "x 的 y 了"),  # Latin values keep it
        ("{} 和 {}", ("甲", "b"), {}, "甲和 b"),
        ("{0} 和 {0}，", ("甲",), {}, "甲和甲，"),
        ("在 {where} 处", (), {"where": "索引 (1, 0)"}, "在索引 (1, 0) 处"),
        ("{a!r} 的", (), {"a": "甲"}, "'甲' 的"),  # a quote is not Chinese
        ("{a:>3} 的", (), {"a": "甲"}, "  甲的"),
        ("{a:<{w}} 的", (), {"a": "甲", "w": 3}, "甲   的"),  # the padding stays
        ("{{x}} 的 {a}", (), {"a": "甲"}, "{x} 的甲"),  # an escaped brace is text
        ("{a}{{ 的", (), {"a": "甲"}, "甲{ 的"),
        ("{a}  的", (), {"a": "甲"}, "甲  的"),  # two spaces are the translator's choice
        ("{a[0]} 的 {b.real}", (), {"a": ["甲"], "b": 2}, "甲的 2"),
        ("第 {n} 行", (), {"n": 3}, "第 3 行"),
    ],
)
def test_a_chinese_message_formats_as_str_format_less_the_space_between_chinese(
    template, args, kwargs, chinese
):
    message = language.ChineseMessage(template)
    assert message.format(*args, **kwargs) == chinese
    # the only difference from str.format: single spaces left out
    english = template.format(*args, **kwargs)
    assert len(english) - len(chinese) == english.count(" ") - chinese.count(" ")
    with pytest.raises((KeyError, IndexError)):
        language.ChineseMessage("{missing} 的 {0}").format()


def test_a_chinese_character_takes_two_columns_when_a_table_is_padded():
    assert language.display_width("结果 x") == 6  # 2 + 2 + the space + x
    assert language.padded("结果", 6) == "结果  " and language.padded("x", 3, right=True) == "  x"
    assert language.padded("形状是", 4) == "形状是"  # already wider: unchanged, never cut
