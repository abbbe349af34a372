"""scripts/mutation.py (``make mutation``) without running cosmic-ray: the module -> tests map,
reproducible samples, outcome classification and the report's counts on fake results."""

from __future__ import annotations

import random
import shlex
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutation():
    name = "course_mutation_script"
    yield load_script("scripts/mutation.py", name, register=True)  # dataclasses need it
    sys.modules.pop(name, None)


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    """A package with a subpackage that re-exports, a module that re-exports, and tests."""
    write(tmp_path, "course_utils/__init__.py", "")
    write(tmp_path, "course_utils/model.py", "def generate(): ...\n")
    write(tmp_path, "course_utils/masks.py", "def combine_masks(): ...\n")
    write(tmp_path, "course_utils/blocks.py", "class Cross: ...\n")
    write(tmp_path, "course_utils/encdec.py", "from course_utils.blocks import Cross\n")
    write(tmp_path, "course_utils/training/__init__.py", "from .schedule import make_optimizer\n")
    write(tmp_path, "course_utils/training/schedule.py", "def make_optimizer(): ...\n")
    write(tmp_path, "tests/test_model.py", "from course_utils.model import generate\n")
    write(tmp_path, "tests/test_zeta.py", "import course_utils.model as m\nimport torch\n")
    write(
        tmp_path,
        "tests/test_formulas_x.py",
        "def test_a():\n    from course_utils import model, masks\n",
    )
    write(tmp_path, "tests/test_train.py", "from course_utils.training import make_optimizer\n")
    write(tmp_path, "tests/test_cross.py", "from course_utils.encdec import Cross\n")
    write(tmp_path, "tests/helpers.py", "from course_utils.masks import combine_masks\n")
    return tmp_path


def test_imports_are_resolved_to_the_defining_module(mutation, fake_repo):
    found = mutation.imported_modules(
        "from course_utils.training import make_optimizer\nimport os\n", fake_repo
    )
    assert "course_utils.training.schedule" in found
    found = mutation.imported_modules("from course_utils import model, masks\n", fake_repo)
    assert {"course_utils.model", "course_utils.masks"} <= found
    found = mutation.imported_modules("from course_utils.encdec import Cross\n", fake_repo)
    assert "course_utils.blocks" in found
    assert mutation.imported_modules("import torch\nfrom os import path\n", fake_repo) == set()
    # a package imported as a name, its functions reached as attributes
    uses = "from course_utils import training\n\ndef f():\n    training.make_optimizer()\n"
    assert "course_utils.training.schedule" in mutation.imported_modules(uses, fake_repo)
    uses = "import course_utils.training as t\nt.make_optimizer\n"
    assert "course_utils.training.schedule" in mutation.imported_modules(uses, fake_repo)
    uses = "import course_utils.training\ncourse_utils.training.make_optimizer()\n"
    assert "course_utils.training.schedule" in mutation.imported_modules(uses, fake_repo)
    assert "course_utils.training.schedule" not in mutation.imported_modules(
        "from course_utils import training\n", fake_repo
    )


def test_tests_for_module_own_tests_first_then_formulas(mutation, fake_repo):
    tests = mutation.tests_for_module("course_utils/model.py", fake_repo)
    assert tests == ["tests/test_model.py", "tests/test_formulas_x.py", "tests/test_zeta.py"]
    # helpers (not test_*.py) do not count; only tests that import the module
    assert mutation.tests_for_module("course_utils/masks.py", fake_repo) == [
        "tests/test_formulas_x.py"
    ]
    assert mutation.tests_for_module("course_utils/training/schedule.py", fake_repo) == [
        "tests/test_train.py"
    ]
    assert mutation.tests_for_module("course_utils/blocks.py", fake_repo) == ["tests/test_cross.py"]


@pytest.mark.tooling  # make test-tooling (CI)
def test_the_real_map_finds_the_formula_tests(mutation):
    assert "tests/test_formulas_masks.py" in mutation.tests_for_module("course_utils/masks.py")
    schedule = mutation.tests_for_module("course_utils/training/schedule.py")
    assert "tests/test_formulas_init_decay.py" in schedule  # via course_utils.training
    model = mutation.tests_for_module("course_utils/model.py")
    assert model[0] == "tests/test_model.py"


def test_teaching_modules_include_optional_ones_that_exist(mutation, fake_repo):
    config = {
        "modules": ["course_utils/model.py"],
        "optional": ["course_utils/masks.py", "course_utils/nope.py"],
    }
    assert mutation.teaching_modules(config, fake_repo) == [
        "course_utils/model.py",
        "course_utils/masks.py",
    ]
    with pytest.raises(FileNotFoundError, match="nope.py"):
        mutation.teaching_modules({"modules": ["course_utils/nope.py"]}, fake_repo)


def test_the_committed_config_lists_existing_modules(mutation):
    config = mutation.load_config()
    modules = mutation.teaching_modules(config)
    assert "course_utils/training/loop.py" in modules and "course_utils/model.py" in modules
    assert mutation.excluded("core/ReplaceBinaryOperator_Add_BitXor", config["exclude_operators"])
    assert not mutation.excluded("core/ReplaceBinaryOperator_Mul_Div", config["exclude_operators"])


def _candidates(mutation, n: int = 200):
    ops = ["core/NumberReplacer", "core/ReplaceBinaryOperator_Mul_Div", "core/AddNot"]
    return [mutation.Candidate(f"job{i}", ops[i % 3], i // 3, i) for i in range(n)]


def test_sampling_is_reproducible_and_ignores_job_order(mutation):
    candidates = _candidates(mutation)
    first = mutation.sample(candidates, 30, 7, "course_utils/model.py")
    shuffled = candidates[:]
    random.Random(0).shuffle(shuffled)  # cosmic-ray's job ids and order are random
    again = mutation.sample(shuffled, 30, 7, "course_utils/model.py")
    assert len(first) == 30 and len({c.job_id for c in first}) == 30
    assert [c.job_id for c in first] == [c.job_id for c in again]
    other_seed = mutation.sample(candidates, 30, 8, "course_utils/model.py")
    assert {c.job_id for c in other_seed} != {c.job_id for c in first}
    assert len(mutation.sample(candidates, 0, 7, "m")) == 200  # 0: all
    assert len(mutation.sample(candidates, 500, 7, "m")) == 200


def _mutant(
    mutation, outcome: str, line: int = 1, original="a", mutated="b", module="course_utils/x.py"
):
    return mutation.Mutant(module, line, "core/NumberReplacer", 0, original, mutated, outcome)


def test_report_counts_a_fake_result_set(mutation):
    equivalents = [
        mutation.Equivalent(
            "course_utils/x.py", "if p > 0:", "if p >= 0:", "dropout p=0 is identity"
        )
    ]
    mutants = (
        [_mutant(mutation, "killed") for _ in range(17)]
        + [_mutant(mutation, "timeout")]
        + [_mutant(mutation, "survived", line=9, original="y = a * b", mutated="y = a / b")]
        + [_mutant(mutation, "survived", original="  if p > 0:", mutated="if p >= 0:  ")]
        # the same change in another module is not the reviewed equivalent
        + [
            _mutant(
                mutation,
                "survived",
                original="if p > 0:",
                mutated="if p >= 0:",
                module="course_utils/z.py",
            )
        ]
        + [_mutant(mutation, "incompetent"), _mutant(mutation, "no-test")]
    )
    summary = mutation.summarise(mutation.classify(mutants, equivalents))
    assert summary["counts"] == {
        "killed": 17,
        "timeout": 1,
        "survived": 2,
        "equivalent": 1,
        "incompetent": 1,
        "no-test": 1,
    }
    assert summary["kill_rate"] == pytest.approx(18 / 20)
    assert summary["equivalents"][0]["reason"] == "dropout p=0 is identity"
    assert {s["line"] for s in summary["survivors"]} == {9, 1}
    entry = {
        **summary,
        "module": "course_utils/x.py",
        "population": 120,
        "seed": 3,
        "commit": "0123456789abcdef",
        "dirty": False,
        "baseline_s": 2.0,
        "timeout_s": 30.0,
        "elapsed_s": 99.0,
        "finished": "now",
        "tests": ["tests/test_x.py"],
    }
    report = mutation.merge_report({"modules": {"old": entry}}, {"x": entry})
    assert list(report["modules"]) == ["old", "x"]
    text = mutation.render_markdown(report)
    assert "| x | 23 / 120 | 17 | 1 | 2 | 1 | 1 | 90.0 % | 3 | 0123456789 |" in text
    assert "`course_utils/x.py:9` NumberReplacer: `y = a * b` -> `y = a / b`" in text
    assert "(dropout p=0 is identity)" in text


def test_outcomes_of_cosmic_ray_results(mutation):
    def result(worker, test=None, output=""):
        return SimpleNamespace(worker_outcome=worker, test_outcome=test, output=output)

    assert mutation.outcome_of(result("normal", "killed", "F\n1 failed")) == "killed"
    assert mutation.outcome_of(result("normal", "killed", "timeout")) == "timeout"
    assert mutation.outcome_of(result("normal", "survived", "1 passed")) == "survived"
    assert mutation.outcome_of(result("normal", "incompetent")) == "incompetent"
    assert mutation.outcome_of(result("exception", "incompetent")) == "incompetent"
    assert mutation.outcome_of(result("no-test")) == "no-test"


def test_changed_lines_of_a_unified_diff(mutation):
    diff = "--- mutation diff ---\n--- a/m.py\n+++ b/m.py\n@@ -3 +3 @@\n"
    diff += "-    x = a * b\n+    x = a / b\n"
    assert mutation.changed_lines(diff) == ("x = a * b", "x = a / b")
    assert mutation.changed_lines("") == ("", "")
    removed = "--- a/m.py\n+++ b/m.py\n@@ -8,8 +8,6 @@\n     return x\n-\n-    @torch.no_grad()\n"
    assert mutation.changed_lines(removed) == ("@torch.no_grad()", "")


def test_failing_tests_and_the_test_command(mutation):
    output = "..F\nFAILED tests/test_a.py::test_b[x y] - AssertionError: no\n"
    output += "ERROR tests/test_c.py::test_d\n"
    assert mutation.failing_tests(output) == [
        "tests/test_a.py::test_b[x y]",
        "tests/test_c.py::test_d",
    ]
    command = mutation.test_command(["tests/test_a.py"], ["tests/test_a.py::test_b[1-2]"])
    parts = shlex.split(command)  # cosmic-ray splits it this way
    assert "-x" in parts and "--deselect=tests/test_a.py::test_b[1-2]" in parts
    assert parts[-1] == "tests/test_a.py"


def test_equivalents_need_a_reason(mutation, tmp_path):
    path = tmp_path / "eq.toml"
    path.write_text(
        '[[equivalent]]\nmodule = "m.py"\noriginal = "a"\nmutated = "b"\nreason = " "\n'
    )
    with pytest.raises(ValueError, match="reason"):
        mutation.load_equivalents(path)


def test_committed_equivalents_name_lines_that_exist(mutation):
    """A reviewed equivalent whose line was edited away is stale: it must be reviewed again."""
    equivalents = mutation.load_equivalents()
    assert equivalents
    for e in equivalents:
        lines = {
            line.strip() for line in (ROOT / e.module).read_text(encoding="utf-8").splitlines()
        }
        assert e.original in lines, f"{e.module}: {e.original!r} is no longer in the file"
        if e.line is not None:  # pinned to a line: that line must still be the one reviewed
            source = (ROOT / e.module).read_text(encoding="utf-8").splitlines()
            assert source[e.line - 1].strip() == e.original, f"{e.module}:{e.line} moved"
        assert e.original != e.mutated and e.reason


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--modules", "nonsense"], "nonsense is not a teaching module"),
        (["--sample", "-1"], "expected 0 (all) or a positive count, got -1"),
    ],
)
def test_usage_errors_are_one_line_exit_2(mutation, argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        mutation.main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.tooling  # the mutation tool scans every test file: make test-tooling (CI)
def test_list_prints_each_module_and_its_tests(mutation, capsys):
    assert mutation.main(["--list", "--modules", "masks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("course_utils/masks.py: tests/") and "test_formulas_masks.py" in out


def test_recheck_reruns_only_the_survivors_and_keeps_the_rest(mutation):
    candidates = _candidates(mutation, 9)
    old = [
        mutation.Mutant("m.py", c.line, c.operator, c.occurrence, "a", "b", outcome)
        for c, outcome in zip(candidates, ["killed"] * 6 + ["survived"] * 2 + ["timeout"])
    ]
    entry = {"module": "m.py", "population": 9, **mutation.summarise(old)}
    chosen = mutation.recheck_candidates(entry, candidates)
    assert [c.line for c in chosen] == [6, 7]
    rerun = [
        mutation.Mutant("m.py", 6, chosen[0].operator, chosen[0].occurrence, "a", "b", "killed")
    ]
    merged = mutation.summarise(mutation.merge_recheck(mutation.previous_mutants(entry), rerun))
    assert merged["counts"]["killed"] == 7 and merged["counts"]["survived"] == 1
    assert merged["kill_rate"] == pytest.approx(8 / 9)
    # an entry without per-mutant results is rebuilt from its counts and lists
    legacy = {k: v for k, v in entry.items() if k != "results"}
    assert mutation.summarise(mutation.previous_mutants(legacy))["counts"] == entry["counts"]
    with pytest.raises(SystemExit, match="changed"):
        mutation.recheck_candidates(entry, candidates[:8])
    # lines moved (code removed above them): matched by their text, not their number
    moved = [mutation.Candidate(c.job_id, c.operator, c.occurrence, c.line + 2) for c in candidates]
    source = "\n".join("a" if n in (8, 9) else "other" for n in range(1, 12))
    assert [c.line for c in mutation.recheck_candidates(entry, moved, source)] == [8, 9]
    with pytest.raises(SystemExit, match="no longer"):
        mutation.recheck_candidates(entry, moved, "\n".join(["other"] * 12))


def test_reclassify_applies_the_reviewed_equivalents_to_an_old_entry(mutation):
    old = [
        _mutant(mutation, "killed"),
        _mutant(mutation, "survived", original="if p > 0:", mutated="if p >= 0:"),
        _mutant(mutation, "equivalent", original="x = 1", mutated="x = 2"),  # no longer listed
    ]
    entry = {"module": "course_utils/x.py", "population": 3, **mutation.summarise(old)}
    equivalents = [mutation.Equivalent("course_utils/x.py", "if p > 0:", "if p >= 0:", "why")]
    pinned = [mutation.Equivalent("course_utils/x.py", "if p > 0:", "if p >= 0:", "why", line=2)]
    assert mutation.reclassify(entry, pinned)["counts"]["equivalent"] == 0  # survivor on line 1
    fresh = mutation.reclassify(entry, equivalents)
    assert fresh["counts"]["equivalent"] == 1 and fresh["counts"]["survived"] == 1
    assert fresh["survivors"][0]["original"] == "x = 1"
    assert fresh["population"] == 3
