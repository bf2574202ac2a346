"""Atomic installation of bundled units below an identity path.

cafleet owns exactly the paths its units name: a skill folder (`skills/cafleet/`) is replaced as
a whole, a single file (`rules/cafleet.rules`) is replaced alone; nothing else in those
directories is read, written or removed. Installing one agent's units is two-phase:

1. *stage*: every unit that differs from what is on disk is written in full next to its target
   (a temporary folder or file in the same directory, fsynced);
2. *commit*: each staged unit takes its target's place by `rename`.

A directory that cannot be written fails in phase 1, before any target changed, and the staged
temporaries are removed: nothing is half-written. A unit that already matches is not touched at
all, so a second run changes no byte and no modification time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass

from cafleet.assets.bundle import Unit
from cafleet.errors import CafleetError

FILE_MODE = 0o644
DIR_MODE = 0o755


class InstallFailed(CafleetError):
    """A unit could not be installed; str() names the path and the OS error."""


@dataclass(frozen=True, slots=True)
class Change:
    path: str  # relative to the identity path, "/"-separated
    change: str  # "created" | "updated" | "removed"


def _os_text(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _target(root: str, unit: Unit) -> str:
    return os.path.join(root, *unit.rel.split("/"))


def _read_folder(path: str) -> dict[str, bytes] | None:
    """The regular files below ``path`` (relative path → bytes); None when ``path`` is not a
    real directory (absent, a file, or a symlink, which cafleet replaces and never follows)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return None
    found: dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames.sort()
        rel_dir = os.path.relpath(dirpath, path)
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}"
            if os.path.islink(full) or not os.path.isfile(full):
                found[rel] = b""  # not ours to read through; its replacement is an update
                continue
            with open(full, "rb") as fh:
                found[rel] = fh.read()
    return found


def _read_file(path: str) -> bytes | None:
    if os.path.islink(path) or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        return fh.read()


def changes_for(root: str, unit: Unit) -> list[Change]:
    """What installing ``unit`` would change (empty: the target already matches). Read-only."""
    target = _target(root, unit)
    if not unit.is_folder:
        current = _read_file(target)
        if current == unit.files[""]:
            return []
        return [Change(unit.rel, "created" if current is None else "updated")]
    existing = _read_folder(target) or {}
    changes = []
    for rel, data in unit.files.items():
        if rel not in existing:
            changes.append(Change(f"{unit.rel}/{rel}", "created"))
        elif existing[rel] != data:
            changes.append(Change(f"{unit.rel}/{rel}", "updated"))
    for rel in existing:
        if rel not in unit.files:
            changes.append(Change(f"{unit.rel}/{rel}", "removed"))
    return changes


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(path, FILE_MODE)


def _stage(root: str, unit: Unit) -> str:
    """Write the unit in full beside its target; return the temporary path."""
    target = _target(root, unit)
    parent = os.path.dirname(target)
    try:
        os.makedirs(parent, mode=DIR_MODE, exist_ok=True)
    except OSError as exc:
        raise InstallFailed(f"cannot create directory {parent}: {_os_text(exc)}") from None
    base = os.path.basename(target)
    try:
        if unit.is_folder:
            tmp = tempfile.mkdtemp(prefix=f".{base}.", suffix=".tmp", dir=parent)
        else:
            fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=parent)
            os.close(fd)
    except OSError as exc:
        raise InstallFailed(f"cannot write {target}: {_os_text(exc)}") from None
    try:
        if unit.is_folder:
            os.chmod(tmp, DIR_MODE)
            for rel, data in unit.files.items():
                path = os.path.join(tmp, *rel.split("/"))
                os.makedirs(os.path.dirname(path), mode=DIR_MODE, exist_ok=True)
                _write_file(path, data)
        else:
            _write_file(tmp, unit.files[""])
    except OSError as exc:
        _remove(tmp)
        raise InstallFailed(f"cannot write {target}: {_os_text(exc)}") from None
    return tmp


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def _commit(root: str, unit: Unit, tmp: str) -> None:
    target = _target(root, unit)
    try:
        if not unit.is_folder:
            if os.path.isdir(target) and not os.path.islink(target):
                raise InstallFailed(f"cannot write {target}: it is a directory")
            os.replace(tmp, target)
            return
        if not os.path.lexists(target):
            os.rename(tmp, target)
            return
        # A folder cannot replace a non-empty folder in one rename: move the old one aside
        # first, and back if the second rename fails.
        aside = tempfile.mkdtemp(
            prefix=f".{os.path.basename(target)}.", suffix=".old", dir=os.path.dirname(target)
        )
        os.rmdir(aside)
        os.rename(target, aside)
        try:
            os.rename(tmp, target)
        except OSError:
            os.rename(aside, target)
            raise
        _remove(aside)
    except OSError as exc:
        raise InstallFailed(f"cannot write {target}: {_os_text(exc)}") from None


def install_units(root: str, units: list[Unit]) -> list[Change]:
    """Install ``units`` below ``root``; return what changed (empty: everything matched).

    Raises `InstallFailed`; a failure while staging leaves every target as it was.
    """
    planned = [(unit, changes_for(root, unit)) for unit in units]
    todo = [(unit, changes) for unit, changes in planned if changes]
    staged: list[tuple[Unit, str]] = []
    try:
        for unit, _changes in todo:
            staged.append((unit, _stage(root, unit)))
    except BaseException:
        for _unit, tmp in staged:
            _remove(tmp)
        raise
    done: list[Change] = []
    for index, (unit, tmp) in enumerate(staged):
        try:
            _commit(root, unit, tmp)
        except BaseException:
            for _unit, later in staged[index:]:
                _remove(later)
            raise
        done.extend(todo[index][1])
    return done


__all__ = ["Change", "InstallFailed", "changes_for", "install_units"]
