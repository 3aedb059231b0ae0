"""Where hosts keep their files: directories private to the user running them.

A host replays what it finds in its directory when it starts: its
placements (factories it imports and calls), its branch store and its
envelope journal. A directory another user can write to is therefore a way
to run code in the host, so:

* a `Cluster` given no ``storage=`` makes a directory of its own with
  ``tempfile.mkdtemp`` (mode 0o700, a fresh name per Cluster) and removes it
  when it closes, if it stopped every host it created (``stop_hosts=True``);
  with ``stop_hosts=False`` the hosts outlive it and the directory is kept;
* a host creates the directories under the storage root
  (``<storage>/<namespace>/<host>/``) with mode 0o700, and refuses to start
  on one (or a storage root) that belongs to another user or that others
  may write to, with a `StoreError` saying which and how to fix it.

A conversation that must survive the Cluster (and the machine's temporary
files) needs an explicit ``storage=`` path.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

from ...errors import StoreError

__all__ = ["check_private", "host_directory", "new_storage", "remove_storage"]

PREFIX = "pride-cluster-"
"""The name prefix of a Cluster's own storage directory (in the system temporary directory)."""


def new_storage() -> Path:
    """A fresh directory only this user can enter (``mkdtemp``: mode 0o700, a new name)."""
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def remove_storage(path: Path) -> None:
    """Remove a Cluster's own storage directory and everything in it (errors are ignored)."""
    shutil.rmtree(path, ignore_errors=True)


def host_directory(storage: Path, namespace: str, host: str) -> Path:
    """``<storage>/<namespace>/<host>``, created private where missing (the storage
    root too), checked where not.

    Raises:
        StoreError: a name would leave the storage root, or a directory on
            the way belongs to another user or is writable by others.
    """
    for part, what in ((namespace, "namespace"), (host, "host name")):
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\0" in part:
            raise StoreError(f"the {what} {part!r} cannot name a directory under {storage}")
    try:  # missing on this machine (a default made on the caller's): made private here
        storage.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the host storage {storage}: {exc}") from exc
    check_private(storage, root=True)
    directory = storage
    for part in (namespace, host):
        directory = directory / part
        try:
            directory.mkdir(mode=0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StoreError(f"cannot create the host directory {directory}: {exc}") from exc
        check_private(directory)
    return directory


def check_private(path: Path, *, root: bool = False) -> None:
    """Raise unless ``path`` is a directory of this user that no one else may write to.

    A storage ``root`` may be shared if it is sticky (like ``/tmp``): others
    can then add entries but not replace this user's.

    Raises:
        StoreError: missing, not a directory (a symlink counts as not), owned
            by another user, or writable by group or others.
    """
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise StoreError(f"cannot use {path} as host storage: {exc}") from exc
    if not stat.S_ISDIR(info.st_mode):
        raise StoreError(f"{path} is not a directory (host storage must be a plain directory)")
    if info.st_uid != os.getuid():
        raise StoreError(
            f"{path} belongs to user {info.st_uid}, not to this one ({os.getuid()}): a host "
            "does not read files another user could have planted; give storage= a directory "
            "of your own"
        )
    writable_by_others = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if writable_by_others and not (root and info.st_mode & stat.S_ISVTX):
        raise StoreError(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}): a host "
            f"does not read files they could have planted; `chmod go-w {path}`, or give "
            "storage= a private directory"
        )
