"""What every hub adapter implements, and the cache layout they share.

A *hub* is a place repositories of weights are downloaded from (Hugging Face, ModelScope). Each adapter is a class
that satisfies :class:`Hub`; :mod:`xinference.model.hub.registry` maps hub names to them, and
:class:`~xinference.model.hub.download.HubDownload` drives them: it owns the cache folder, the entry metadata, the
cross-process lock, progress and cancellation, and asks the adapter only to list, locate and fetch files.

The cache location is the same for every hub and every run::

    XINFERENCE_HOME/cache/<hub>/<org>--<repo>/<revision>/<files, as laid out in the repository>
    .../<revision>/.xinference/entry.json              what is there: files, sizes, etags, commit, model names
    .../<revision>/.xinference/partial/<file>.<etag>.incomplete   a transfer not finished yet
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from xinference import settings
from xinference.errors import LaunchFailed

if TYPE_CHECKING:
    from xinference.model.hub.download import HubDownload

__all__ = [
    "CHUNK_BYTES",
    "META_DIR",
    "FileProgressCallback",
    "Hub",
    "ProgressCallback",
    "RemoteFile",
    "cache_folder",
    "inside",
    "repo_folder",
    "revision_folder",
]

#: Called with (bytes done, bytes expected; 0 when unknown) as a download advances.
ProgressCallback = Callable[[int, int], None]
#: (file name, bytes of it on disk, its size when the hub said): per file, for the launch progress's file list.
FileProgressCallback = Callable[[str, int, "int | None"], None]

META_DIR = ".xinference"
CHUNK_BYTES = 1 << 20

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
_REVISION = re.compile(r"^[\w.-]{1,120}$")


@dataclass(frozen=True)
class RemoteFile:
    """One repository file as its hub described it just before the transfer.

    ``url`` is where the bytes are (None when the hub's own client fetches them); ``etag`` identifies this version
    of the file (a partial download of another version is thrown away); ``commit`` is the revision's commit hash
    when the hub says it.
    """

    name: str
    url: str | None = None
    etag: str | None = None
    size: int | None = None
    commit: str | None = None


class Hub(Protocol):
    """A hub adapter. Methods raise :class:`~xinference.errors.LaunchFailed` with a message a user can act on
    (token needed, not found, unreachable, package missing); backend exceptions never leave the adapter.

    Adding a hub: write a module with a class like this one and add one line to ``registry.HUB_FACTORIES``.
    """

    #: The hub's name in launches (``download_hub``) and its folder under the cache root.
    name: str

    def check_online(self, job: HubDownload) -> None:
        """Raise when files that are not cached cannot be fetched now (an offline switch is set)."""
        ...

    def list_files(self, repo_id: str, revision: str | None) -> dict[str, int | None]:
        """Every file of the revision: path in the repository -> size in bytes (None when unknown)."""
        ...

    def resolve(self, repo_id: str, revision: str | None, filename: str) -> RemoteFile:
        """Where one file's bytes are, with its etag, size and the commit; may ask the hub."""
        ...

    def fetch(self, job: HubDownload, remote: RemoteFile) -> None:
        """Put ``remote`` at ``job.path_of(remote.name)``, reporting bytes with ``job.advanced`` and stopping
        (LaunchFailed) once ``job.check_cancel`` raises. A partial file may stay behind for the next attempt."""
        ...


def repo_folder(repo_id: str) -> str:
    """``org/name`` -> ``org--name``; LaunchFailed for an id that could escape its folder."""
    if not _REPO_ID.fullmatch(repo_id) or ".." in repo_id:
        raise LaunchFailed(f"invalid hub repository id {repo_id[:120]!r}; expected org/name")
    return repo_id.replace("/", "--")


def revision_folder(revision: str | None) -> str:
    """A revision as a folder name (``main`` when none; ``refs/pr/1`` -> ``refs--pr--1``)."""
    name = (revision or "main").replace("/", "--")
    if not _REVISION.fullmatch(name) or name.startswith("."):
        raise LaunchFailed(f"invalid hub revision {revision!r}")
    return name


def cache_folder(hub: str, repo_id: str, revision: str | None) -> Path:
    """The cache folder of one repository revision of ``hub`` (see the module docstring for its layout)."""
    return settings.cache_dir() / hub / repo_folder(repo_id) / revision_folder(revision)


def inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing names that would land outside ``root`` (absolute, ``..``, NUL) or in the
    cache's own metadata folder."""
    if not relative or "\0" in relative or relative.startswith(("/", "\\")) or META_DIR in Path(relative).parts:
        raise LaunchFailed(f"refusing the repository file name {relative[:120]!r}")
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise LaunchFailed(f"refusing the repository file name {relative[:120]!r}")
    return path
