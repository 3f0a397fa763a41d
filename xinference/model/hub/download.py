"""HubDownload: fetches files of one repository revision into the cache, resumable, with progress, cancellable,
offline-aware.

Used by :func:`xinference.model.download.resolve_model_path` in the model subprocess when a spec's weights come
from a hub. A file listed in ``entry.json`` with its full size is used as is, without asking the hub (so a cached
model launches offline); anything else is fetched by the hub's adapter (:mod:`xinference.model.hub.base`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from xinference.errors import LaunchFailed
from xinference.model.hub.base import (
    META_DIR,
    FileProgressCallback,
    ProgressCallback,
    RemoteFile,
    cache_folder,
    inside,
)
from xinference.model.hub.registry import get_hub

__all__ = ["HubDownload"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _entry_lock(meta: Path, cancel: threading.Event | None, what: str) -> Iterator[None]:
    """One download per cache entry at a time, across processes (a second launcher waits, cancellable)."""
    try:
        import fcntl
    except ImportError:  # Windows: no cross-process lock
        yield
        return
    meta.mkdir(parents=True, exist_ok=True)
    with open(meta / "lock", "a+b") as handle:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if cancel is not None and cancel.is_set():
                    raise LaunchFailed(f"the download of {what} was cancelled") from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class HubDownload:
    """Fetches files of one repository revision into its cache folder.

    ``progress`` gets (bytes done, bytes expected) for the whole call; ``cancel`` is checked between chunks and
    stops the download with LaunchFailed (the partial file stays, so the next attempt continues it). Hub adapters
    get this object while they fetch and use ``path_of``, ``partial_dir``, ``check_cancel`` and ``advanced``.
    """

    def __init__(
        self,
        hub: str,
        repo_id: str,
        revision: str | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
        model_name: str | None = None,
        file_progress: FileProgressCallback | None = None,
    ) -> None:
        self.adapter = get_hub(hub)
        self.hub = hub
        self.repo_id = repo_id
        self.revision = revision
        self.folder = cache_folder(hub, repo_id, revision)
        self.partial_dir = self.folder / META_DIR / "partial"
        self._meta_dir = self.folder / META_DIR
        self._progress = progress
        self._file_progress = file_progress
        self._cancel = cancel
        self._model_name = model_name
        self._done = 0
        self._total = 0

    # -- public ----------------------------------------------------------------------------------------------
    def file(self, filename: str) -> str:
        """Local path of one repository file (a GGUF), downloaded unless already cached."""
        dest = inside(self.folder, filename)
        with _entry_lock(self._meta_dir, self._cancel, self.describe()):
            entry = self._read_entry()
            if not self._cached(entry, filename):
                self._check_online()
                remote = self.adapter.resolve(self.repo_id, self.revision, filename)
                self._total = remote.size or 0
                self._fetch(entry, remote)
            self._remember(entry, [])
        self._report(self._total or 1, self._total or 1)
        return str(dest)

    def snapshot(self, wanted: Callable[[list[str]], list[str]]) -> str:
        """Local folder with the repository files that ``wanted`` picks from the full listing."""
        with _entry_lock(self._meta_dir, self._cancel, self.describe()):
            entry = self._read_entry()
            if entry.get("snapshot") and all(self._cached(entry, name) for name in entry["snapshot"]):
                self._remember(entry, [])
                self._report(1, 1)
                return str(self.folder)
            self._check_online()
            listing = self.adapter.list_files(self.repo_id, self.revision)
            names = wanted(sorted(listing))
            if not names:
                raise LaunchFailed(f"the repository {self.describe()} has no weight or config files to download")
            for name in names:
                inside(self.folder, name)
            self._total = sum(listing.get(name) or 0 for name in names)
            for name in names:
                if not self._cached(entry, name):
                    self._fetch(entry, self.adapter.resolve(self.repo_id, self.revision, name))
                    self._write_entry(entry)
                self._done += entry["files"][name]["size"]
            self._remember(entry, names)
        self._report(self._total or 1, self._total or 1)
        return str(self.folder)

    # -- for the hub adapters --------------------------------------------------------------------------------
    def describe(self) -> str:
        """``'org/name' from <hub>``, for messages."""
        return f"{self.repo_id!r} from {self.hub}"

    def path_of(self, filename: str) -> Path:
        """Where a repository file goes in the cache (LaunchFailed for a name that would leave it)."""
        return inside(self.folder, filename)

    def check_cancel(self) -> None:
        """Raise LaunchFailed once the launch was cancelled; adapters call it between chunks or files."""
        if self._cancel is not None and self._cancel.is_set():
            raise LaunchFailed(f"the download of {self.describe()} was cancelled")

    def advanced(self, filename: str, file_bytes: int, file_size: int | None) -> None:
        """``file_bytes`` of ``filename`` are on disk now: reports the whole call's and the file's progress."""
        self._report(self._done + file_bytes, self._total)
        if self._file_progress is not None:
            self._file_progress(filename, file_bytes, file_size)

    # -- internals -------------------------------------------------------------------------------------------
    def _fetch(self, entry: dict[str, Any], remote: RemoteFile) -> None:
        self.adapter.fetch(self, remote)
        path = self.folder / remote.name
        if not path.is_file():
            raise LaunchFailed(f"{self.hub} did not deliver {remote.name!r} of {self.repo_id!r}")
        if remote.commit:
            entry["commit"] = remote.commit
        entry["files"][remote.name] = {"size": path.stat().st_size, "etag": remote.etag}

    def _check_online(self) -> None:
        self.check_cancel()
        self.adapter.check_online(self)

    def _report(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress(done, total)

    def _read_entry(self) -> dict[str, Any]:
        try:
            data = json.loads((self._meta_dir / "entry.json").read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("files"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {
            "hub": self.hub,
            "repo_id": self.repo_id,
            "revision": self.revision or "main",
            "commit": None,
            "model_names": [],
            "files": {},
            "snapshot": None,
        }

    def _write_entry(self, entry: dict[str, Any]) -> None:
        self._meta_dir.mkdir(parents=True, exist_ok=True)
        entry["updated"] = int(time.time())
        tmp = self._meta_dir / f"entry.json.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(entry, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self._meta_dir / "entry.json")

    def _remember(self, entry: dict[str, Any], snapshot: list[str]) -> None:
        if snapshot:
            entry["snapshot"] = snapshot
        if self._model_name and self._model_name not in entry["model_names"]:
            entry["model_names"].append(self._model_name)
        self._write_entry(entry)

    def _cached(self, entry: dict[str, Any], name: str) -> bool:
        known = entry["files"].get(name)
        path = self.folder / name
        return bool(known) and path.is_file() and path.stat().st_size == known.get("size")
