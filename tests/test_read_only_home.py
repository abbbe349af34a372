"""Shared machines: with a read-only home (or MPLCONFIGDIR), plotting and the tokenizers
(tiktoken, jieba) still work, their caches go to a per-user writable folder, and nothing lands
in a file shared by all users in /tmp.

Each case runs in a fresh Python process, because matplotlib chooses its cache folder once, at
import. The directory is made truly read-only: ``chmod 555`` for a normal user; for root, who
ignores permission bits, a read-only bind mount inside a private mount namespace (``unshare``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tooling  # make test-tooling (CI), not make test

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys
from pathlib import Path

out, read_only = Path(sys.argv[1]), Path(sys.argv[2])
report = {}
try:
    (read_only / "probe").write_text("x")
    report["read_only"] = False
except OSError:
    report["read_only"] = True

import course_utils.lab.viz as viz
import matplotlib
import matplotlib.pyplot as plt

viz.use_course_style()
fig, ax = plt.subplots(figsize=(3, 2))
ax.plot([0, 1], [1, 0])
ax.set_title("注意力 attention")
fig.savefig(out / "figure.png")
report["configdir"] = matplotlib.get_configdir()
report["cachedir"] = matplotlib.get_cachedir()

# The tokenizers' per-user caches: tiktoken's rank files and jieba's dictionary.
from course_utils import tokenization

encoding = tokenization.load_encoding("cl100k_base")
report["tiktoken_round_trip"] = encoding.decode(encoding.encode("hello 你好")) == "hello 你好"
report["jieba_words"] = tokenization.split_words("我爱北京天安门")
print(json.dumps(report))
"""


def _can_unshare() -> bool:
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    probe = subprocess.run([unshare, "-rm", "true"], capture_output=True)
    return probe.returncode == 0


def _run_with_read_only(read_only: Path, args: list[str], env: dict) -> subprocess.CompletedProcess:
    """Run ``args`` while ``read_only`` cannot be written to by the process."""
    run = dict(env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
    if os.geteuid() != 0:
        read_only.chmod(0o555)
        try:
            return subprocess.run(args, **run)
        finally:
            read_only.chmod(0o755)
    if not _can_unshare():
        pytest.skip("running as root without user namespaces: no way to make a read-only folder")
    script = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    command = ["unshare", "-rm", "sh", "-c", script, "sh", str(read_only), *args]
    return subprocess.run(command, **run)


def _environment(tmp_path: Path, **changes: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "MPL"))}
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        env.pop(name, None)
    env.update(MPLBACKEND="Agg", TMPDIR=str(tmp_path / "tmp"), **changes)
    return env


def _run(tmp_path: Path, read_only: Path, env: dict) -> tuple[dict, str]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    result = _run_with_read_only(
        read_only, [sys.executable, "-c", CHILD, str(out), str(read_only)], env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (out / "figure.png").stat().st_size > 1000
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["read_only"], "the test setup failed to make the folder read-only"
    return report, result.stderr


def _check_common(report: dict, stderr: str, read_only: Path, shared_tmp: Path) -> None:
    assert "temporary cache directory" not in stderr, stderr
    assert "is not a writable directory" not in stderr, stderr
    assert "missing from font" not in stderr, stderr
    assert list(read_only.iterdir()) == [], "something was written into the read-only folder"
    assert report["configdir"] == report["cachedir"]
    assert list(Path(report["cachedir"]).glob("fontlist-*.json")), "no font cache was written"
    # Nothing in the shared temp folder itself: no /tmp/jieba.cache, /tmp/data-gym-cache or
    # /tmp/matplotlib-xxxx; only the private per-user folder, if anything.
    uid = os.getuid()
    assert {p.name for p in shared_tmp.iterdir()} <= {f"transformer-course-{uid}"}
    assert report["tiktoken_round_trip"]
    assert report["jieba_words"] == ["我", "爱", "北京", "天安门"]


def test_read_only_home(tmp_path):
    home, shared_tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir()
    shared_tmp.mkdir()
    env = _environment(tmp_path, HOME=str(home))

    report, stderr = _run(tmp_path, home, env)
    _check_common(report, stderr, home, shared_tmp)
    private = shared_tmp / f"transformer-course-{os.getuid()}"
    assert Path(report["cachedir"]) == private / "matplotlib"
    assert private.stat().st_mode & 0o777 == 0o700, "the per-user folder must be private"
    assert list((private / "jieba").iterdir()), "jieba's dictionary cache is in the private folder"

    # A second process reuses the font cache instead of rebuilding it.
    font_cache = next(Path(report["cachedir"]).glob("fontlist-*.json"))
    built = font_cache.stat().st_mtime_ns
    report_again, stderr_again = _run(tmp_path, home, env)
    _check_common(report_again, stderr_again, home, shared_tmp)
    assert report_again["cachedir"] == report["cachedir"]
    assert font_cache.stat().st_mtime_ns == built


def test_read_only_mplconfigdir(tmp_path):
    home, config, shared_tmp = tmp_path / "home", tmp_path / "mplconfig", tmp_path / "tmp"
    for folder in (home, config, shared_tmp):
        folder.mkdir()
    env = _environment(tmp_path, HOME=str(home), MPLCONFIGDIR=str(config))

    report, stderr = _run(tmp_path, config, env)
    _check_common(report, stderr, config, shared_tmp)
    # The home folder is writable here, so the cache goes to the per-user cache under it.
    cache = home / ".cache" / "transformer-course"
    assert Path(report["cachedir"]) == cache / "matplotlib"
    assert list((cache / "jieba").iterdir()), "jieba's dictionary cache is under the home folder"
