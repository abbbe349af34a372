"""Mutation testing of the teaching modules with cosmic-ray (``make mutation``).

A mutant is the module with one small change (an operator, a constant, a comparison, a
boolean); the unit tests "kill" it when they fail. A mutant that survives is a change to the
course's math that no test notices, unless it is *equivalent* (it computes the same thing,
e.g. ``dropout_p >= 0`` vs ``> 0`` when ``F.dropout`` with p = 0 is the identity): those are
listed, each with a reason, in ``benchmarks/mutation/equivalents.toml`` and counted apart.

For each module listed in ``scripts/mutation.toml`` this script

1. copies the working tree to a scratch folder (cosmic-ray rewrites the module on disk while
   a mutant's tests run; the checkout itself is never touched, so an interrupted run leaves
   nothing mutated behind);
2. finds the unit tests that import the module (``tests/test_*.py``, scanned with ``ast``;
   names re-exported by a package ``__init__`` are followed to the module defining them);
3. runs those tests once unmutated (they must pass; their time sets the per-mutant timeout);
4. enumerates the mutants with cosmic-ray (``cosmic_ray.commands.init``), keeps a
   reproducible sample (``--sample N --seed S``), and runs each with cosmic-ray's
   ``mutate_and_test`` (``pytest -x`` over that test subset);
5. writes ``benchmarks/mutation/report.json`` and ``report.md``: per module, killed, survived,
   equivalent, timeouts, and each survivor with file:line and the mutation. Modules not run
   this time keep their previous entry.

Usage: ``make mutation [MODULES="model masks"] [SAMPLE=40] [SEED=0]``, or
``python scripts/mutation.py --list`` for the module -> tests map.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import fcntl
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG_PATH = ROOT / "scripts" / "mutation.toml"
REPORT_DIR = ROOT / "benchmarks" / "mutation"
EQUIVALENTS_PATH = REPORT_DIR / "equivalents.toml"
PACKAGE = "course_utils"
TARGET_RATE = 0.95

# What a mutant's test run can end as (cosmic-ray's outcome, with its timeouts told apart).
OUTCOMES = ("killed", "timeout", "survived", "equivalent", "incompetent", "no-test")


# ----------------------------------------------------------------------------- config
def load_config(path: Path = CONFIG_PATH) -> dict:
    """The TOML config: ``modules``, ``optional``, ``exclude_operators``, timeouts."""
    with open(path, "rb") as handle:
        return tomllib.load(handle)


def teaching_modules(config: dict, root: Path = ROOT) -> list[str]:
    """The modules to mutate (paths relative to ``root``): every listed one, and each
    ``optional`` one that exists. A listed module that is missing is an error."""
    missing = [m for m in config["modules"] if not (root / m).is_file()]
    if missing:
        raise FileNotFoundError(
            f"scripts/mutation.toml lists {missing}, which do not exist under {root}: "
            "fix the path or move the module to `optional`"
        )
    optional = [m for m in config.get("optional", []) if (root / m).is_file()]
    return list(config["modules"]) + optional


def dotted(path: str) -> str:
    """``course_utils/training/schedule.py`` -> ``course_utils.training.schedule``."""
    parts = Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def short_name(path: str) -> str:
    """``course_utils/training/schedule.py`` -> ``training/schedule`` (the report's key)."""
    return str(Path(path).with_suffix("")).removeprefix(PACKAGE + "/")


# ----------------------------------------------------------------------------- tests by import
def _module_file(name: str, root: Path) -> Path | None:
    base = root.joinpath(*name.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _reexports(module: str, root: Path) -> dict[str, str]:
    """Names a module (or a package's ``__init__``) imports at its top level from other
    ``course_utils`` modules: name -> the module it comes from."""
    path = _module_file(module, root)
    if path is None:
        return {}
    found = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, module, is_package=path.name == "__init__.py")
            if source.split(".")[0] == PACKAGE:
                for alias in node.names:
                    found[alias.asname or alias.name] = source
    return found


def _absolute(node: ast.ImportFrom, current: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = current.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    return ".".join(parts[:keep] + ([node.module] if node.module else []))


def _defining(module: str, name: str, root: Path) -> set[str]:
    source = _reexports(module, root).get(name)
    return {source} if source else set()


def _dotted_attribute(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute chain on a name, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def _resolve_attribute(dotted_name: str, root: Path) -> set[str]:
    """``course_utils.training.train`` -> the module the name lives in (following the
    package's re-export) and the modules on the way."""
    parts = dotted_name.split(".")
    found = set()
    for end in range(len(parts), 0, -1):
        module = ".".join(parts[:end])
        if _module_file(module, root) is not None:
            found.add(module)
            if end < len(parts):
                source = _reexports(module, root).get(parts[end])
                if source:
                    found.add(source)
                    found.update(_defining(source, parts[end], root))
            break
    return found


def imported_modules(source: str, root: Path = ROOT, current: str = "") -> set[str]:
    """The ``course_utils`` modules a file imports, each resolved to the module that defines
    the imported name (``from course_utils.training import make_optimizer`` ->
    ``course_utils.training.schedule``; ``from course_utils import model`` ->
    ``course_utils.model``; ``from course_utils import training`` then ``training.train(...)``
    -> ``course_utils.training.loop``). Imports inside functions count too."""
    found: set[str] = set()
    bound: dict[str, str] = {}  # a name in the file -> the course_utils module it holds
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    found.add(alias.name)
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:
                        bound[PACKAGE] = PACKAGE
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, current, is_package=False) if node.level else node.module
            if not base or base.split(".")[0] != PACKAGE:
                continue
            found.add(base)
            exports = _reexports(base, root)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                if _module_file(submodule, root) is not None:
                    found.add(submodule)
                    bound[alias.asname or alias.name] = submodule
                elif alias.name in exports:
                    found.add(exports[alias.name])
                    # one more hop: a package re-exporting a module's re-export
                    found.update(_defining(exports[alias.name], alias.name, root))
    if bound:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Store):
                name = _dotted_attribute(node)
                head = name.split(".")[0] if name else None
                if head in bound:
                    found.update(_resolve_attribute(bound[head] + name[len(head) :], root))
    return found


def tests_for_module(module: str, root: Path = ROOT) -> list[str]:
    """The unit-test files (``tests/test_*.py``) that import ``module`` (a path such as
    ``course_utils/model.py``), the module's own test files (``test_<name>*.py``) first, then
    ``test_formulas_*``, then the rest by name: ``pytest -x`` then stops soonest."""
    name = dotted(module)
    stem = Path(module).stem
    hits = [
        path.relative_to(root).as_posix()
        for path in sorted((root / "tests").glob("test_*.py"))
        if name in imported_modules(path.read_text(encoding="utf-8"), root)
    ]

    def order(test: str) -> tuple[int, str]:
        file = Path(test).stem
        own = file == f"test_{stem}" or file.startswith(f"test_{stem}_")
        return (0 if own else 1 if file.startswith("test_formulas_") else 2, test)

    return sorted(hits, key=order)


# ----------------------------------------------------------------------------- sampling
@dataclass(frozen=True)
class Candidate:
    """One mutant as cosmic-ray enumerates it (before it runs)."""

    job_id: str
    operator: str
    occurrence: int
    line: int


def excluded(operator: str, patterns: list[str]) -> bool:
    """Whether the config's ``exclude_operators`` leaves this operator out."""
    return any(re.fullmatch(pattern, operator) for pattern in patterns)


def sample(candidates: list[Candidate], size: int, seed: int, module: str) -> list[Candidate]:
    """A reproducible sample: the same module source, size and seed give the same mutants
    (cosmic-ray's job ids are random, so candidates are ordered by operator and occurrence
    first). ``size <= 0`` or larger than the population keeps them all."""
    ordered = sorted(candidates, key=lambda c: (c.operator, c.occurrence))
    if size <= 0 or size >= len(ordered):
        return ordered
    rng = random.Random(f"{seed}:{module}")
    picked = rng.sample(range(len(ordered)), size)
    return [ordered[i] for i in sorted(picked)]


# ----------------------------------------------------------------------------- results
@dataclass
class Mutant:
    """One mutant's result, in the report's terms."""

    module: str  # path relative to the repository, e.g. course_utils/model.py
    line: int
    operator: str
    occurrence: int
    original: str  # the changed line before ...
    mutated: str  # ... and after the mutation (stripped)
    outcome: str  # killed, timeout, survived, incompetent or no-test
    reason: str = ""  # why it is equivalent (set by classify)


@dataclass(frozen=True)
class Equivalent:
    module: str
    original: str
    mutated: str
    reason: str
    line: int | None = None  # only where the same change elsewhere in the file is not equivalent


def load_equivalents(path: Path = EQUIVALENTS_PATH) -> list[Equivalent]:
    """The reviewed equivalent mutants: module, the original and mutated line, a reason."""
    if not path.is_file():
        return []
    with open(path, "rb") as handle:
        entries = tomllib.load(handle).get("equivalent", [])
    result = []
    for entry in entries:
        missing = {"module", "original", "mutated", "reason"} - set(entry)
        if missing or not entry.get("reason", "").strip():
            raise ValueError(
                f"{path}: entry {entry} lacks {sorted(missing) or ['a non-empty reason']}: "
                "each equivalent needs module, original, mutated and a one-line reason"
            )
        result.append(
            Equivalent(
                entry["module"],
                entry["original"].strip(),
                entry["mutated"].strip(),
                entry["reason"].strip(),
                entry.get("line"),
            )
        )
    return result


def classify(mutants: list[Mutant], equivalents: list[Equivalent]) -> list[Mutant]:
    """Survivors that match a reviewed equivalent (same module, same line before and after)
    become ``equivalent``, with its reason."""
    for mutant in mutants:
        key = (mutant.module, mutant.original.strip(), mutant.mutated.strip())
        for e in equivalents:
            same_line = e.line is None or e.line == mutant.line
            if (
                mutant.outcome == "survived"
                and (e.module, e.original, e.mutated) == key
                and same_line
            ):
                mutant.outcome, mutant.reason = "equivalent", e.reason
                break
    return mutants


def summarise(mutants: list[Mutant]) -> dict:
    """Counts per outcome and the kill rate: (killed + timeouts) / (killed + timeouts +
    survived); equivalent, incompetent (the tests could not run) and no-test mutants are
    left out of the rate."""
    counts = {outcome: 0 for outcome in OUTCOMES}
    for mutant in mutants:
        counts[mutant.outcome] += 1
    detected = counts["killed"] + counts["timeout"]
    judged = detected + counts["survived"]
    return {
        "counts": counts,
        "mutants": len(mutants),
        "kill_rate": detected / judged if judged else None,
        "survivors": [asdict(m) for m in mutants if m.outcome == "survived"],
        "equivalents": [asdict(m) for m in mutants if m.outcome == "equivalent"],
        "timeouts": [asdict(m) for m in mutants if m.outcome == "timeout"],
        "incompetent": [asdict(m) for m in mutants if m.outcome == "incompetent"],
        "results": [asdict(m) for m in mutants],
    }


def previous_mutants(entry: dict) -> list[Mutant]:
    """The mutants of an earlier report entry (entries without ``results`` are rebuilt from
    their lists and counts; their killed and no-test mutants carry no detail)."""
    fields = set(Mutant.__dataclass_fields__)
    if "results" in entry:
        return [Mutant(**{k: v for k, v in m.items() if k in fields}) for m in entry["results"]]
    listed = [
        Mutant(**{k: v for k, v in m.items() if k in fields})
        for key in ("survivors", "equivalents", "timeouts", "incompetent")
        for m in entry.get(key, [])
    ]
    for outcome in ("killed", "no-test"):
        listed += [
            Mutant(entry["module"], 0, "?", -1, "", "", outcome)
            for _ in range(entry["counts"][outcome])
        ]
    return listed


def recheck_candidates(
    entry: dict, candidates: list[Candidate], source: str | None = None
) -> list[Candidate]:
    """The candidates that are the survivors of ``entry``: same operator and occurrence, on
    a line with the same text (``source``, the module now: lines elsewhere may have moved) or
    else the same line number. The mutant population must be the same size as then."""
    if entry["population"] != len(candidates):
        raise SystemExit(
            f"mutation: {entry['module']} has {len(candidates)} mutants now, "
            f"{entry['population']} at the last run: it changed; run it whole (no --recheck)"
        )
    by_key = {(c.operator, c.occurrence): c for c in candidates}
    chosen = []
    for m in entry["survivors"]:
        candidate = by_key.get((m["operator"], m["occurrence"]))
        if candidate is not None and source is not None and m["original"]:
            lines = source.splitlines()
            now = lines[candidate.line - 1].strip() if candidate.line <= len(lines) else None
            same = now == m["original"]
        else:
            same = candidate is not None and candidate.line == m["line"]
        if not same:
            raise SystemExit(
                f"mutation: survivor {m['module']}:{m['line']} {m['operator']} is no longer "
                "the same mutant: run the module whole (without --recheck)"
            )
        chosen.append(candidate)
    return chosen


def reclassify(entry: dict, equivalents: list[Equivalent]) -> dict:
    """``entry`` with the equivalents file applied again (after reviewing survivors), nothing
    run: survivors that now match an entry become equivalent, and stale ones survive again."""
    mutants = previous_mutants(entry)
    for mutant in mutants:
        if mutant.outcome == "equivalent":
            mutant.outcome, mutant.reason = "survived", ""
    return {**entry, **summarise(classify(mutants, equivalents))}


def merge_recheck(previous: list[Mutant], rerun: list[Mutant]) -> list[Mutant]:
    """``previous`` with each re-run mutant's outcome replacing its earlier one."""
    fresh = {(m.operator, m.occurrence): m for m in rerun}
    return [fresh.get((m.operator, m.occurrence), m) for m in previous]


def changed_lines(diff: str) -> tuple[str, str]:
    """The first non-blank removed and added source lines of cosmic-ray's unified diff,
    stripped (``""`` for a line removed with nothing in its place, e.g. a decorator)."""
    lines = diff.splitlines()

    def first(sign: str) -> str:
        for line in lines:
            if line.startswith(sign) and not line.startswith(sign * 3) and line[1:].strip():
                return line[1:].strip()
        return ""

    return first("-"), first("+")


def outcome_of(result) -> str:
    """A cosmic-ray ``WorkResult`` -> one of :data:`OUTCOMES` (timeouts are told apart:
    cosmic-ray counts them killed, with the output ``"timeout"``)."""
    worker = str(getattr(result.worker_outcome, "value", result.worker_outcome))
    test = str(getattr(result.test_outcome, "value", result.test_outcome))
    if worker == "no-test":
        return "no-test"
    if worker != "normal" or test == "incompetent":
        return "incompetent"
    if test == "killed":
        return "timeout" if (result.output or "").strip() == "timeout" else "killed"
    return "survived"


# ----------------------------------------------------------------------------- report
def merge_report(previous: dict | None, modules: dict) -> dict:
    """The report with this run's modules replaced and the others kept as they were."""
    report = {"target_kill_rate": TARGET_RATE, "modules": {}}
    if previous:
        report["modules"].update(previous.get("modules", {}))
    report["modules"].update(modules)
    report["modules"] = dict(sorted(report["modules"].items()))
    return report


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{100 * rate:.1f} %"


def render_markdown(report: dict) -> str:
    """The report a reader opens: a table per module, then each survivor and equivalent."""
    lines = [
        "# Mutation testing of the teaching modules",
        "",
        "Made by `make mutation` (scripts/mutation.py, cosmic-ray). A mutant is one small change "
        "to a module (an operator, a constant, a comparison); it is *killed* when the unit "
        "tests that import the module fail. Kill rate = (killed + timeouts) / (killed + "
        "timeouts + survived); equivalent mutants (reviewed in "
        "`benchmarks/mutation/equivalents.toml`) and incompetent ones (the tests could not "
        f"run) are counted apart. Target: at least {100 * TARGET_RATE:.0f} % in every module.",
        "",
        "| module | sampled / all | killed | timeouts | survived | equivalent | incompetent "
        "| kill rate | seed | commit |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, entry in report["modules"].items():
        c = entry["counts"]
        lines.append(
            f"| {name} | {entry['mutants']} / {entry['population']} | {c['killed']} | "
            f"{c['timeout']} | {c['survived']} | {c['equivalent']} | {c['incompetent']} | "
            f"{_percent(entry['kill_rate'])} | {entry['seed']} | {entry['commit'][:10]}"
            f"{' (dirty)' if entry.get('dirty') else ''} |"
        )
    for title, key in (("Survivors", "survivors"), ("Equivalent mutants", "equivalents")):
        lines += ["", f"## {title}", ""]
        rows = [m for entry in report["modules"].values() for m in entry[key]]
        if not rows:
            lines.append("None.")
        for m in rows:
            why = f" ({m['reason']})" if m.get("reason") else ""
            lines.append(
                f"- `{m['module']}:{m['line']}` {m['operator'].removeprefix('core/')}: "
                f"`{m['original']}` -> `{m['mutated']}`{why}"
            )
    lines += ["", "## Runs", ""]
    for name, entry in report["modules"].items():
        lines.append(
            f"- {name}: {entry['mutants']} mutants in {entry['elapsed_s']:.0f} s "
            f"(unmutated tests {entry['baseline_s']:.1f} s, timeout {entry['timeout_s']:.0f} s), "
            f"at {entry['finished']}"
            + (
                f" (re-ran the {entry['rechecked']} earlier survivors)"
                if entry.get("rechecked")
                else ""
            )
            + f", tests: {', '.join(entry['tests'])}"
            + (
                f"; left out (failing unmutated): {', '.join(entry['deselected'])}"
                if entry.get("deselected")
                else ""
            )
        )
    return "\n".join(lines) + "\n"


def write_report(modules: dict, report_dir: Path) -> Path:
    """Merge ``modules`` into ``report_dir``/report.json and rewrite report.md from it."""
    report_dir.mkdir(parents=True, exist_ok=True)
    json_path = report_dir / "report.json"
    # two runs side by side (different modules) must not lose each other's entries
    with open(report_dir / ".report.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        text = json_path.read_text(encoding="utf-8") if json_path.is_file() else ""
        report = merge_report(json.loads(text) if text else None, modules)
        json_path.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        (report_dir / "report.md").write_text(render_markdown(report), encoding="utf-8")
    return report_dir / "report.md"


# ----------------------------------------------------------------------------- running
def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()


def copy_tree(root: Path, scratch: Path, source: str = "head") -> None:
    """Copy the code into ``scratch``: the last commit (``source="head"``, what the report
    names), or the working tree with its uncommitted edits (``"worktree"``: tracked and
    untracked, not ignored files)."""
    if source == "head":
        archive = subprocess.run(
            ["git", "archive", "HEAD"], cwd=root, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(scratch)], input=archive.stdout, check=True)
        return
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        path = root / rel
        if path.is_file():
            target = scratch / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def failing_tests(pytest_output: str) -> list[str]:
    """Node ids of the ``FAILED``/``ERROR`` lines of pytest's short summary (``-rfE``)."""
    found = []
    for line in pytest_output.splitlines():
        match = re.match(r"(?:FAILED|ERROR) (.+?)(?: - .*)?$", line.strip())
        if match:
            found.append(match.group(1))
    return found


def _test_env(scratch: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(scratch), str(scratch / "tests" / "offline")])
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def test_command(tests: list[str], deselect: list[str] = (), stop_first: bool = True) -> str:
    """The pytest command a mutant runs (``-x``: the first failure kills it)."""
    options = ["-x"] if stop_first else ["-rfE"]
    options += [f"--deselect={shlex.quote(node)}" for node in deselect]
    return " ".join(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, *tests]
    )


_SCRATCH: list[Path] = []


def run_module(module: str, args: argparse.Namespace, config: dict, equivalents) -> dict:
    """Mutate one module in a scratch copy and return its report entry."""
    from cosmic_ray.commands import init as cosmic_ray_init
    from cosmic_ray.mutating import mutate_and_test
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    scratch = Path(tempfile.mkdtemp(prefix=f"mutation-{Path(module).stem}-", dir=args.workdir))
    _SCRATCH.append(scratch)  # removed by main() however the run ends (unless --keep)
    copy_tree(ROOT, scratch, args.source)
    if not (scratch / module).is_file():
        raise SystemExit(
            f"mutation: {module} is not in the {args.source} copy (not committed yet?)"
        )
    tests = tests_for_module(module, scratch)
    if not tests:
        raise SystemExit(
            f"mutation: no test in tests/ imports {module}; nothing would kill its mutants"
        )
    env = _test_env(scratch)
    where = subprocess.run(
        [sys.executable, "-c", f"import {dotted(module)} as m; print(m.__file__)"],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(where).resolve().is_relative_to(scratch.resolve()):
        raise SystemExit(
            f"mutation: {dotted(module)} imports from {where}, not from the scratch copy"
        )

    start = time.perf_counter()
    baseline = subprocess.run(
        shlex.split(test_command(tests, stop_first=False)),
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
    )
    baseline_s = time.perf_counter() - start
    deselected = failing_tests(baseline.stdout) if baseline.returncode != 0 else []
    if baseline.returncode != 0 and not (args.deselect_failing and deselected):
        raise SystemExit(
            f"mutation: the unmutated tests of {module} fail "
            f"({', '.join(deselected) or 'see below'}); fix them first, or pass "
            f"--deselect-failing to leave them out:\n{baseline.stdout[-3000:]}"
        )
    command = test_command(tests, deselected)
    timeout = max(config["timeout_min"], config["timeout_factor"] * baseline_s)

    session = scratch / "mutation-session.sqlite"
    with use_db(str(session), WorkDB.Mode.create) as db:
        cosmic_ray_init([Path(module)], db, {})
        items = list(db.work_items)
    by_id = {item.job_id: item for item in items}
    candidates = [
        Candidate(
            i.job_id,
            i.mutations[0].operator_name,
            i.mutations[0].occurrence,
            i.mutations[0].start_pos[0],
        )
        for i in items
        if not excluded(i.mutations[0].operator_name, config["exclude_operators"])
    ]
    previous_entry = _previous_entry(module, args.report_dir) if args.recheck else None
    if args.recheck:
        if previous_entry is None:
            raise SystemExit(f"mutation: --recheck needs an earlier run of {module} in the report")
        source = (scratch / module).read_text(encoding="utf-8")
        chosen = recheck_candidates(previous_entry, candidates, source)
    else:
        chosen = sample(candidates, args.sample, args.seed, module)
    print(
        f"{module}: {len(chosen)} of {len(candidates)} mutants, tests {' '.join(tests)} "
        f"(unmutated {baseline_s:.1f} s, timeout {timeout:.0f} s), scratch {scratch}",
        flush=True,
    )
    mutants = []
    old_cwd = os.getcwd()
    old_env = dict(os.environ)
    os.chdir(scratch)  # cosmic-ray runs the tests from the current directory
    os.environ.clear()
    os.environ.update(env)
    begin = time.perf_counter()
    try:
        with use_db(str(session), WorkDB.Mode.open) as db:
            skipped = set(by_id) - {c.job_id for c in chosen}
            db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
            for n, candidate in enumerate(chosen, 1):
                item = by_id[candidate.job_id]
                result = mutate_and_test(item.mutations, command, timeout)
                db.set_result(candidate.job_id, result)
                original, mutated = changed_lines(result.diff or "")
                mutant = Mutant(
                    module,
                    candidate.line,
                    candidate.operator,
                    candidate.occurrence,
                    original,
                    mutated,
                    outcome_of(result),
                )
                mutants.append(mutant)
                print(
                    f"  [{n}/{len(chosen)}] {mutant.outcome:11s} {module}:{mutant.line} "
                    f"{mutant.original!r} -> {mutant.mutated!r}",
                    flush=True,
                )
    finally:
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    elapsed = time.perf_counter() - begin
    if previous_entry is not None:
        mutants = merge_recheck(previous_mutants(previous_entry), mutants)
    summary = summarise(classify(mutants, equivalents))
    dirty = args.source == "worktree" and bool(_git("status", "--porcelain", "--", module, *tests))
    return {
        **summary,
        "module": module,
        "population": len(candidates),
        "sample": previous_entry["sample"] if previous_entry else args.sample,
        "seed": previous_entry["seed"] if previous_entry else args.seed,
        "rechecked": len(chosen) if previous_entry else None,
        "tests": tests,
        "deselected": deselected,
        "source": args.source,
        "commit": _git("rev-parse", "HEAD"),
        "dirty": dirty,
        "baseline_s": round(baseline_s, 2),
        "timeout_s": round(timeout, 1),
        "elapsed_s": round(elapsed, 1),
        "finished": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def _previous_entry(module: str, report_dir: Path) -> dict | None:
    path = report_dir / "report.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8"))["modules"].get(short_name(module))


def _parser(modules: list[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="make mutation",
        description="Mutation testing of the teaching modules (cosmic-ray), module by module.",
    )
    parser.add_argument(
        "--modules",
        nargs="*",
        default=[],
        help="modules to run, by short name (model, training/schedule) or path; default: all "
        f"of {', '.join(short_name(m) for m in modules)}",
    )
    parser.add_argument(
        "--sample", type=int, default=0, help="mutants per module, a seeded random sample (0: all)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument(
        "--workdir",
        default=None,
        help="where the scratch copies go (default: the system temp folder)",
    )
    parser.add_argument(
        "--report-dir", type=Path, default=REPORT_DIR, help="where report.json and report.md go"
    )
    parser.add_argument(
        "--source",
        choices=("head", "worktree"),
        default="head",
        help="mutate the last commit (default; the report names it) or the working tree as it is",
    )
    parser.add_argument(
        "--deselect-failing",
        action="store_true",
        help="leave out tests that fail unmutated (the report lists them) instead of stopping",
    )
    parser.add_argument(
        "--recheck",
        action="store_true",
        help="run again only the last report's survivors of each module (after adding tests); "
        "the other results are kept",
    )
    parser.add_argument(
        "--reclassify",
        action="store_true",
        help="apply benchmarks/mutation/equivalents.toml to the last report again; run nothing",
    )
    parser.add_argument(
        "--keep",
        action="store_true",
        help="keep the scratch copies (with cosmic-ray's session files)",
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="print each module's tests and mutant count, run nothing",
    )
    return parser


def resolve_modules(
    requested: list[str], modules: list[str], parser: argparse.ArgumentParser
) -> list[str]:
    """Short names or paths -> module paths; an unknown name is a usage error (exit 2)."""
    names = {short_name(m): m for m in modules} | {m: m for m in modules}
    wanted = [w for item in requested for w in item.replace(",", " ").split()]
    unknown = [w for w in wanted if w not in names]
    if unknown:
        parser.error(
            f"argument --modules: {', '.join(unknown)} is not a teaching module; choose from "
            f"{', '.join(short_name(m) for m in modules)} (or add it to scripts/mutation.toml)"
        )
    return [names[w] for w in wanted] or modules


def main(argv: list[str] | None = None) -> int:
    config = load_config()
    modules = teaching_modules(config)
    parser = _parser(modules)
    args = parser.parse_args(argv)
    if args.sample < 0:
        parser.error(f"argument --sample: expected 0 (all) or a positive count, got {args.sample}")
    chosen = resolve_modules(args.modules, modules, parser)
    if args.list:
        for module in chosen:
            print(f"{module}: {' '.join(tests_for_module(module)) or '(no test imports it)'}")
        return 0
    equivalents = load_equivalents()
    if args.reclassify:
        path = args.report_dir / "report.json"
        if not path.is_file():
            parser.error(f"argument --reclassify: no report at {path} yet; run make mutation first")
        entries = json.loads(path.read_text(encoding="utf-8"))["modules"]
        wanted = {short_name(m) for m in chosen}
        fresh = {k: reclassify(v, equivalents) for k, v in entries.items() if k in wanted}
        print(f"reclassified {', '.join(fresh)}: report {write_report(fresh, args.report_dir)}")
        return 0
    try:
        _run_all(chosen, args, config, equivalents)
    finally:
        while _SCRATCH and not args.keep:
            shutil.rmtree(_SCRATCH.pop(), ignore_errors=True)
    return 0


def _run_all(chosen: list[str], args: argparse.Namespace, config: dict, equivalents) -> None:
    for module in chosen:
        entry = run_module(module, args, config, equivalents)
        path = write_report({short_name(module): entry}, args.report_dir)
        print(
            f"{module}: kill rate {_percent(entry['kill_rate'])} "
            f"({entry['counts']}), report {path}",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
