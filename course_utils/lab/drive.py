"""Colab: the learner's parts folder on their Google Drive.

In Colab every notebook runs on its own machine, so the parts saved in one notebook are gone in
the next unless they live on the learner's Drive. :func:`parts_on_drive_in_colab` is what
:func:`course_utils.exercises.keeping.parts_folder` calls the first time a Colab notebook needs
the folder; :func:`keep_parts_on_drive` does it at once. This module imports nothing of the
course's but :mod:`course_utils.lab.language` (standard library only), so the keeping of parts can
import it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from course_utils.lab.language import tr  # standard library only

FOLDER_ENV = "COURSE_MY_MODEL"  # names the parts folder (course_utils.exercises.keeping)
DRIVE_FOLDER = "/content/drive/MyDrive/transformer_course/my_model"
MOUNT_POINT = "/content/drive"


def in_colab() -> bool:
    """Whether this kernel runs in Google Colab (its ``google.colab`` package is there)."""
    return importlib.util.find_spec("google") is not None and (
        importlib.util.find_spec("google.colab") is not None
    )


def keep_parts_on_drive(folder: str | None = None, mount_point: str | None = None) -> Path | None:
    """In Colab, keep the learner's parts on their Google Drive, so the next notebook (a new
    machine) finds them: mounts the Drive at ``mount_point`` (default :data:`MOUNT_POINT`)
    unless it is there (Colab asks the learner to allow it), creates ``folder`` (default
    :data:`DRIVE_FOLDER`) and points the parts folder there (``COURSE_MY_MODEL``) for this
    notebook. The first use of the parts folder in a Colab notebook does it too; outside Colab
    it changes nothing and says where the parts are kept.

    Returns:
        The folder on the Drive, or None outside Colab.

    Raises:
        Whatever ``google.colab.drive.mount`` raises when the learner declines or the Drive
        cannot be reached.
    """
    if not in_colab():
        here = Path(os.environ.get(FOLDER_ENV) or "my_model")
        print(
            tr("Not in Colab: your parts are kept in {folder} on this machine.").format(folder=here)
        )
        return None
    from google.colab import drive

    mount_point = mount_point or MOUNT_POINT
    if not (Path(mount_point) / "MyDrive").is_dir():
        drive.mount(mount_point)
    path = Path(folder or DRIVE_FOLDER)
    path.mkdir(parents=True, exist_ok=True)
    os.environ[FOLDER_ENV] = str(path)
    print(tr("Your parts are kept on your Google Drive: {folder}").format(folder=path))
    return path


def parts_on_drive_in_colab() -> str | None:
    """The parts folder of a Colab notebook that has none yet: on the Google Drive
    (:func:`keep_parts_on_drive`); if the learner declines the Drive or it cannot be mounted,
    the machine's ``./my_model``, said in one line (the parts are then lost with the runtime).
    Either way ``COURSE_MY_MODEL`` then names it, so the notebook asks once.

    Returns:
        The folder (a str), or None outside Colab.
    """
    if not in_colab():
        return None
    try:
        return str(keep_parts_on_drive())
    except Exception as error:  # declined, timed out, or no Drive: Colab raises its own types
        local = str(Path("my_model").resolve())
        os.environ[FOLDER_ENV] = local
        print(
            tr(
                "Your parts are kept on this Colab machine only, in {folder}: the Google Drive "
                "was not mounted ({error}). They are lost when the runtime stops; run "
                "keep_parts_on_drive() to try the Drive again."
            ).format(folder=local, error=error)
        )
        return local
