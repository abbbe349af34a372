"""The measurement commands check every argument before any training or file write:
one line, exit status 2 (issue 31, item 4)."""

import pytest

from course_utils.measure import compare_blocks, record


@pytest.fixture
def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return path


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--sample-chars", "-1"], "--sample-chars must be 0 or more, got -1"),
        (["--max-chars", "-5"], "--max-chars must be at least 1, got -5"),
        (["--max-chars", "0"], "--max-chars must be at least 1, got 0"),
    ],
)
def test_record_refuses_bad_numbers_before_training(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        record.parse_args(["--config", "baby", *argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_record_refuses_an_out_path_under_a_file(a_file, capsys):
    with pytest.raises(SystemExit) as stop:
        record.parse_args(["--config", "baby", "--out", str(a_file / "run.json")])
    assert stop.value.code == 2
    assert f"{a_file} is a file, so no folder can be made under it" in capsys.readouterr().err


def test_record_refuses_a_folder_as_out(tmp_path, capsys):
    with pytest.raises(SystemExit):
        record.parse_args(["--config", "baby", "--out", str(tmp_path)])
    assert "is a folder; name the JSON file to write" in capsys.readouterr().err


@pytest.mark.parametrize("module", [record, compare_blocks])
def test_unknown_rehearsal_mode_is_one_line_exit_2(module, monkeypatch, capsys):
    monkeypatch.setenv("COURSE_REHEARSE", "cuda-fp8")
    argv = ["--config", "baby"] if module is record else ["memory"]
    with pytest.raises(SystemExit) as stop:
        module.parse_args(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "COURSE_REHEARSE='cuda-fp8' is not a rehearsal mode" in err
    assert len(err.strip().splitlines()) == 1


def test_compare_blocks_refuses_an_out_under_a_file_and_a_negative_seed(a_file, capsys):
    with pytest.raises(SystemExit) as stop:
        compare_blocks.parse_args(["memory", "--out", str(a_file / "x.json")])
    assert stop.value.code == 2
    with pytest.raises(SystemExit):
        compare_blocks.parse_args(["train", "--arm", "modern", "--seed", "-1"])
    assert "--seed must be at least 0, got -1" in capsys.readouterr().err


def test_valid_arguments_pass(tmp_path):
    args = record.parse_args(["--config", "baby", "--out", str(tmp_path / "new" / "run.json")])
    assert args.sample_chars == 300
    assert compare_blocks.parse_args(["memory", "--out", str(tmp_path / "m.json")]).threads == 1
