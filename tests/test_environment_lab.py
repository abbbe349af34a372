"""`make lab` as a student runs it (issue 23).

* It opens ``work/`` (git-ignored): a copy of every notebook, made the first time and never
  overwritten, so what a student runs and saves never changes ``notebooks/``, the reference
  that ``make test`` checks.
* The kernel shows under the course's name, and only its ``display_name`` changes: nbconvert
  and nbval still start it as ``python3`` with the same command, and every notebook still
  records ``python3`` (what Colab and ``make course`` use).
* JupyterLab's news pop-up is off (a settings default inside .venv, and no news feed).

The working copies and the settings are made by real ``make`` runs; the last test starts
JupyterLab itself through ``make lab`` and asks its server what a browser would get.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from makefile_env import clean_make_env, run_make, venv_as_is

pytestmark = pytest.mark.tooling  # make test-tooling (CI), not make test

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venv"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
COURSE_KERNEL = "Transformer course (.venv)"
TEMPLATE = ROOT / "scripts" / "templates" / "jupyterlab_overrides.json"
OVERRIDES = Path("share/jupyter/lab/settings/overrides.d/transformer-course.json")
KERNEL_JSON = Path("share/jupyter/kernels/python3/kernel.json")
# What ipykernel ships as the python3 kernel (its wheel's share/jupyter/kernels/python3).
SHIPPED_KERNEL = {
    "argv": ["python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
    "display_name": "Python 3 (ipykernel)",
    "language": "python",
    "metadata": {"debugger": True, "supported_encryption": ["curve"]},
    "kernel_protocol_version": "5.5",
}


# --- the working copies -----------------------------------------------------------------------


def test_make_lab_opens_the_working_copies_without_news():
    result = run_make("-n", "lab", "WORK=my work")
    assert result.returncode == 0, result.stderr
    (line,) = [x for x in result.stdout.splitlines() if "/bin/jupyter" in x]
    assert " lab " in line and "--LabApp.news_url=None" in line
    assert line.rstrip().endswith('"my work/"'), line
    assert "notebooks/" not in line.split(" lab ", 1)[1]
    assert "/work/" in (ROOT / ".gitignore").read_text().splitlines()


def test_working_copies_are_made_once_and_never_overwritten(tmp_path):
    work = tmp_path / "my work"  # a space in the path, too
    committed = {p.name: p.read_bytes() for p in NOTEBOOKS}
    first = run_make("work", f"WORK={work}")
    assert first.returncode == 0, first.stderr
    assert sorted(p.name for p in work.iterdir()) == sorted(committed)
    assert all((work / name).read_bytes() == data for name, data in committed.items())
    assert first.stdout.count("your copy of notebooks/") == len(committed)

    # A student runs a notebook (outputs saved) and deletes another to get it fresh.
    edited, deleted = work / NOTEBOOKS[1].name, work / NOTEBOOKS[2].name
    edited.write_text('{"a student": "saved this"}')
    deleted.unlink()
    second = run_make("work", f"WORK={work}")
    assert second.returncode == 0, second.stderr
    assert edited.read_text() == '{"a student": "saved this"}', "a saved copy was overwritten"
    assert deleted.read_bytes() == committed[deleted.name], "a deleted copy comes back fresh"
    assert second.stdout.strip() == f"made {deleted}, your copy of notebooks/{deleted.name}"
    assert {p.name: p.read_bytes() for p in NOTEBOOKS} == committed, "notebooks/ unchanged"


def test_readme_says_where_a_students_work_goes():
    readme = (ROOT / "README.md").read_text()
    assert "work/" in readme and "make test" in readme
    assert "never overwrites a copy" in readme


# --- the kernel's name and JupyterLab's settings, in a scratch venv ---------------------------


def _scratch_venv(tmp_path: Path, with_kernel: bool) -> Path:
    """A venv whose python sees this .venv's packages (a .pth), made without a download."""
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "course.pth").write_text("\n".join(sys.path[1:]) + "\n")
    if with_kernel:
        (venv / KERNEL_JSON).parent.mkdir(parents=True)
        (venv / KERNEL_JSON).write_text(json.dumps(SHIPPED_KERNEL, indent=1))
    return venv


def test_lab_config_renames_the_kernel_and_changes_nothing_else(tmp_path):
    venv = _scratch_venv(tmp_path, with_kernel=True)
    result = run_make("lab-config", f"VENV={venv}")
    assert result.returncode == 0, result.stdout + result.stderr
    spec = json.loads((venv / KERNEL_JSON).read_text())
    assert spec == {**SHIPPED_KERNEL, "display_name": COURSE_KERNEL}, "only the name changes"
    assert (venv / OVERRIDES).read_bytes() == TEMPLATE.read_bytes()
    settings = json.loads(TEMPLATE.read_text())["@jupyterlab/apputils-extension:notification"]
    assert settings == {"fetchNews": "false", "checkForUpdates": False}
    before = {p: p.stat().st_mtime_ns for p in (venv / KERNEL_JSON, venv / OVERRIDES)}
    time.sleep(0.05)
    again = run_make("lab-config", f"VENV={venv}")
    assert again.returncode == 0 and again.stdout == ""
    assert {p: p.stat().st_mtime_ns for p in before} == before, "a second run writes nothing"


def test_lab_config_installs_the_kernel_when_the_venv_has_none(tmp_path):
    venv = _scratch_venv(tmp_path, with_kernel=False)
    result = run_make("lab-config", f"VENV={venv}")
    assert result.returncode == 0, result.stdout + result.stderr
    spec = json.loads((venv / KERNEL_JSON).read_text())
    assert spec["display_name"] == COURSE_KERNEL and "ipykernel_launcher" in spec["argv"]


# --- the project's .venv: nbconvert, nbval and the notebooks still say python3 ---------------


def test_every_notebook_records_the_python3_kernel():
    """What Colab, nbconvert (make course) and a fresh JupyterLab look up by name."""
    for path in NOTEBOOKS:
        spec = json.loads(path.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        assert spec["name"] == "python3", f"{path.name}: kernelspec {spec}"


@pytest.fixture(scope="module")
def course_kernel():
    """The project's .venv with the course's kernel name, as make setup / make lab leave it."""
    result = run_make("lab-config")
    assert result.returncode == 0, result.stdout + result.stderr
    spec = json.loads((VENV / KERNEL_JSON).read_text())
    assert spec["display_name"] == COURSE_KERNEL
    return spec


def test_nbconvert_still_runs_python3_in_the_venv_and_keeps_the_metadata(tmp_path, course_kernel):
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {
        "display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"
    }  # fmt: skip
    notebook.cells = [nbformat.v4.new_code_cell("import sys\nprint(sys.prefix)")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(notebook, path)
    subprocess.run(
        [str(VENV / "bin" / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
         "--inplace", "--ExecutePreprocessor.kernel_name=python3", str(path)],
        check=True, capture_output=True, timeout=300,
        env={**os.environ, "JUPYTER_PLATFORM_DIRS": "1"},
    )  # fmt: skip
    executed = nbformat.read(path, as_version=4)
    assert executed.cells[0].outputs[0]["text"].strip() == str(VENV)
    assert executed.metadata["kernelspec"] == notebook.metadata["kernelspec"]


# --- JupyterLab itself, started by make lab ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(url: str, deadline: float) -> bytes:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return response.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_make_lab_serves_the_course_kernel_the_copies_and_no_news(tmp_path, course_kernel):
    port, token, work = _free_port(), "course-test", tmp_path / "work"
    env = {
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "user-settings"),  # not the user's own
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
    }
    args = f"--no-browser --ServerApp.token={token} --ServerApp.ip=127.0.0.1"
    server = subprocess.Popen(
        # -o: setup counts as done (no pip run here; the .venv is the one the tests use)
        ["make", "--no-print-directory", *venv_as_is(VENV), "lab",
         f"WORK={work}", f"PORT={port}", f"ARGS={args}"],
        cwd=ROOT, env=clean_make_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    base, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
    try:
        specs = json.loads(_get(f"{base}/api/kernelspecs?token={token}", deadline))
        assert specs["default"] == "python3"
        assert specs["kernelspecs"]["python3"]["spec"]["display_name"] == COURSE_KERNEL
        listing = json.loads(_get(f"{base}/api/contents?token={token}", deadline))
        assert sorted(item["name"] for item in listing["content"]) == [p.name for p in NOTEBOOKS]
        plugin = "@jupyterlab/apputils-extension:notification"
        settings = json.loads(_get(f"{base}/lab/api/settings/{plugin}?token={token}", deadline))
        # The course's values are the defaults (a student's own choice still wins).
        defaults = {k: v.get("default") for k, v in settings["schema"]["properties"].items()}
        assert defaults["fetchNews"] == "false" and defaults["checkForUpdates"] is False, defaults
        assert "fetchNews" not in settings["settings"], "nothing in the user's own settings"
        page = _get(f"{base}/lab?token={token}", deadline).decode()
        assert '"news": {"disabled": true}' in page
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
