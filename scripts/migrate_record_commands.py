"""One-off migration (issue 24): the recorded runs' ``command`` field names the new module path.

The measurement commands moved from ``course_utils.record`` / ``course_utils.compare_blocks``
to ``course_utils.measure.record`` / ``course_utils.measure.compare_blocks``. The runs under
``assets/runs/`` are too long to redo, so only the module path inside each record's
``command`` string is rewritten, by text substitution on that one line: every other byte of
the file stays as it was. Running it twice changes nothing.

Usage: python scripts/migrate_record_commands.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD = re.compile(r'^(\s*"command": "python -m course_utils\.)(record|compare_blocks)( )', re.M)


def main() -> None:
    changed = 0
    for path in sorted((ROOT / "assets" / "runs").rglob("*.json")):
        text = path.read_text(encoding="utf-8")
        new, count = OLD.subn(r"\1measure.\2\3", text)
        if count > 1:
            raise SystemExit(f"{path}: {count} command fields; expected at most one")
        if count:
            path.write_text(new, encoding="utf-8")
            changed += 1
    print(f"rewrote the command of {changed} records")


if __name__ == "__main__":
    main()
