"""Execute notebooks twice and check that their text outputs are identical, as nbval compares them.

Usage::

    python scripts/check_determinism.py notebooks/00_overview.ipynb notebooks/04_qkv_and_heads.ipynb
    make determinism    # every notebook

Each notebook is executed in a fresh kernel, in memory (the file is not rewritten), ``--runs``
times (default 2). The outputs are then reduced to what strict nbval compares: streams merged
per name, every output key and MIME type except images, metadata, tracebacks and execution
counts, each string sanitised with the regexes of ``tests/nbval_sanitize.cfg``; cells tagged
``nbval-ignore-output`` (as the notebooks' are) or marked ``# NBVAL_IGNORE_OUTPUT`` or
``# NBVAL_SKIP`` are left out, as nbval does. Exit status 1 if any notebook's runs differ, with
the first differing line of each cell.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbval.plugin import (
    coalesce_streams,
    find_comment_markers,
    find_metadata_tags,
    get_sanitize_patterns,
)

ROOT = Path(__file__).resolve().parents[1]
SANITIZE_FILE = ROOT / "tests" / "nbval_sanitize.cfg"
# The keys strict nbval does not compare (nbval.plugin.IPyNbFile.skip_compare, without nbdime).
SKIP_COMPARE = {
    "metadata",
    "traceback",
    "prompt_number",
    "output_type",
    "name",
    "execution_count",
    "application/vnd.jupyter.widget-view+json",
    "image/png",
    "image/jpeg",
}


def sanitize_patterns(path: Path = SANITIZE_FILE) -> list[tuple[str, str]]:
    """The ``(regex, replace)`` pairs of an nbval sanitise file."""
    return get_sanitize_patterns(path.read_text(encoding="utf-8"))


def _sanitize(value, patterns: list[tuple[str, str]]):
    if isinstance(value, list):  # multi-line strings may be stored as lists
        value = "".join(value)
    if not isinstance(value, str):
        return value
    for regex, replace in patterns:
        value = re.sub(regex, replace, value)
    return value


def compared_outputs(
    notebook: nbformat.NotebookNode, patterns: list[tuple[str, str]]
) -> dict[str, list[tuple[str, object]]]:
    """``{cell id: [(key, sanitised value), ...]}`` for every code cell nbval compares."""
    result = {}
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        markers = dict(find_comment_markers(cell.source))
        markers.update(dict(find_metadata_tags(cell.metadata)))
        if markers.get("skip") or markers.get("check", True) is False:
            continue
        values = []
        for output in coalesce_streams(copy.deepcopy(cell.get("outputs", []))):
            if output.output_type == "stream":
                values.append((f"stream:{output.name}", _sanitize(output.text, patterns)))
                continue
            for key, value in output.items():
                if key in SKIP_COMPARE:
                    continue
                if key == "data":
                    for mime, data in value.items():
                        if mime not in SKIP_COMPARE:
                            values.append((mime, _sanitize(data, patterns)))
                else:
                    values.append((key, _sanitize(value, patterns)))
        result[cell.get("id") or f"cell {index}"] = values
    return result


def differences(first: dict, second: dict) -> list[str]:
    """One line per cell whose compared outputs differ, quoting the first differing line."""
    found = []
    for cell_id in sorted(set(first) | set(second), key=str):
        a, b = first.get(cell_id), second.get(cell_id)
        if a == b:
            continue
        if a is None or b is None:
            found.append(f"{cell_id}: present in one run only")
            continue
        text_a = "\n".join(f"{k}: {v}" for k, v in a).splitlines()
        text_b = "\n".join(f"{k}: {v}" for k, v in b).splitlines()
        for line_a, line_b in zip(text_a + [""], text_b + [""]):
            if line_a != line_b:
                found.append(f"{cell_id}: {line_a!r} != {line_b!r}")
                break
        else:
            found.append(f"{cell_id}: outputs differ")
    return found


def execute(path: Path, timeout: int = 600) -> nbformat.NotebookNode:
    """Run the notebook top to bottom in a fresh ``python3`` kernel, in its own folder."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.resolve().parent)}},
    )
    client.execute()
    return notebook


def check(path: Path, runs: int = 2) -> list[str]:
    """Execute ``path`` ``runs`` times; the differences between the first run and each other."""
    patterns = sanitize_patterns()
    outputs = [compared_outputs(execute(path), patterns) for _ in range(runs)]
    found = []
    for number, other in enumerate(outputs[1:], start=2):
        found += [f"run 1 vs run {number}: {line}" for line in differences(outputs[0], other)]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    failed = False
    for path in args.notebooks:
        found = check(path, args.runs)
        failed |= bool(found)
        verdict = "identical" if not found else "DIFFERENT"
        print(f"{path}: {verdict} text outputs in {args.runs} runs", flush=True)
        for line in found:
            print(f"  {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
