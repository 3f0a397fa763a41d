"""Downloads from model hubs into the platform's cache: resumable, with progress, cancellable, offline-aware.

Used by :func:`xinference.model.download.resolve_model_path` in the model subprocess when a spec's weights come
from a hub. The cache has one folder per repository revision, the same on every run::

    XINFERENCE_HOME/cache/<hub>/<org>--<repo>/<revision>/<files, as laid out in the repository>
    .../<revision>/.xinference/entry.json              what is there: files, sizes, etags, commit, model names
    .../<revision>/.xinference/partial/<file>.<etag>.incomplete   a transfer not finished yet

A file listed in ``entry.json`` with its full size is used as is, without asking the hub (so a cached model
launches offline). Anything else is fetched; a partial file is continued with an HTTP ``Range`` request, both when
the connection drops mid-way (retried here) and on the next launch after a cancel or a crash.

Hugging Face: ``huggingface_hub`` locates each file (URL, redirects, token, etag, size, commit); the transfer is
ours, because ``hf_hub_download`` deletes its partial file on any failure (so a cancelled launch would start over)
and cannot stop between chunks. ``HF_ENDPOINT``, ``HF_TOKEN`` and ``HF_HUB_OFFLINE`` are read at call time.
ModelScope: the optional ``modelscope`` package does the whole transfer (progress jumps from 0 to 1).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from xinference import settings
from xinference.errors import LaunchFailed

__all__ = [
    "HUBS",
    "META_DIR",
    "HubDownload",
    "FileProgressCallback",
    "ProgressCallback",
    "hf_endpoint",
    "hub_offline",
    "repo_folder",
    "revision_folder",
]

logger = logging.getLogger(__name__)

#: Called with (bytes done, bytes expected; 0 when unknown) as a download advances.
ProgressCallback = Callable[[int, int], None]
#: (file name, bytes of it on disk, its size when the hub said): per file, for the launch progress's file list.
FileProgressCallback = Callable[[str, int, "int | None"], None]

HUBS = ("huggingface", "modelscope")
META_DIR = ".xinference"
DEFAULT_HF_ENDPOINT = "https://huggingface.co"
CHUNK_BYTES = 1 << 20
#: Failed attempts in a row (no byte received in between) before a transfer gives up.
MAX_STALLED_ATTEMPTS = 3

_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]{0,95}/[\w.-]{1,96}$")
_REVISION = re.compile(r"^[\w.-]{1,120}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TRUE = frozenset({"1", "true", "yes", "on"})


def hf_endpoint() -> str:
    """``HF_ENDPOINT`` (a mirror, or a test's fake hub), else huggingface.co."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_HF_ENDPOINT).rstrip("/")


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set: only cached files may be used."""
    return any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _connect_timeout() -> float:
    return float(os.environ.get("HF_HUB_ETAG_TIMEOUT") or 10)


def _read_timeout() -> float:
    return float(os.environ.get("HF_HUB_DOWNLOAD_TIMEOUT") or 30)


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


def _inside(root: Path, relative: str) -> Path:
    """``root / relative``, refusing names that would land outside ``root`` (absolute, ``..``, NUL)."""
    if not relative or "\0" in relative or relative.startswith(("/", "\\")) or META_DIR in Path(relative).parts:
        raise LaunchFailed(f"refusing the repository file name {relative[:120]!r}")
    path = (root / relative).resolve()
    if not path.is_relative_to(root.resolve()):
        raise LaunchFailed(f"refusing the repository file name {relative[:120]!r}")
    return path


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
    stops the download with LaunchFailed (the partial file stays, so the next attempt continues it).
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
        if hub not in HUBS:
            raise LaunchFailed(f"unknown download hub {hub!r}; use one of {', '.join(HUBS)}")
        self.hub = hub
        self.repo_id = repo_id
        self.revision = revision
        self.folder = settings.cache_dir() / hub / repo_folder(repo_id) / revision_folder(revision)
        self._meta_dir = self.folder / META_DIR
        self._progress = progress
        self._file_progress = file_progress
        self._file_size: int | None = None
        self._cancel = cancel
        self._model_name = model_name
        self._done = 0
        self._total = 0

    # -- public ----------------------------------------------------------------------------------------------
    def file(self, filename: str) -> str:
        """Local path of one repository file (a GGUF), downloaded unless already cached."""
        dest = _inside(self.folder, filename)
        with _entry_lock(self._meta_dir, self._cancel, self._what()):
            entry = self._read_entry()
            if self._cached(entry, filename):
                self._remember(entry, [])
                self._report(1, 1)
                return str(dest)
            self._check_online()
            if self.hub == "modelscope":
                self._modelscope(entry, [filename])
                return str(dest)
            url, etag, size = self._hf_locate(filename, entry)
            self._total = size or 0
            self._transfer(filename, url, etag, size)
            entry["files"][filename] = {"size": dest.stat().st_size, "etag": etag}
            self._remember(entry, [])
        self._report(self._total or 1, self._total or 1)
        return str(dest)

    def snapshot(self, wanted: Callable[[list[str]], list[str]]) -> str:
        """Local folder with the repository files that ``wanted`` picks from the full listing."""
        with _entry_lock(self._meta_dir, self._cancel, self._what()):
            entry = self._read_entry()
            if entry.get("snapshot") and all(self._cached(entry, name) for name in entry["snapshot"]):
                self._remember(entry, [])
                self._report(1, 1)
                return str(self.folder)
            self._check_online()
            if self.hub == "modelscope":
                self._modelscope(entry, None, wanted)
                return str(self.folder)
            listing = self._hf_list()
            names = wanted(sorted(listing))
            if not names:
                raise LaunchFailed(f"the repository {self._what()} has no weight or config files to download")
            for name in names:
                _inside(self.folder, name)
            self._total = sum(listing[name] or 0 for name in names)
            for name in names:
                if self._cached(entry, name):
                    self._done += entry["files"][name]["size"]
                    continue
                url, etag, size = self._hf_locate(name, entry)
                self._transfer(name, url, etag, size)
                self._done += (self.folder / name).stat().st_size
                entry["files"][name] = {"size": (self.folder / name).stat().st_size, "etag": etag}
                self._write_entry(entry)
            self._remember(entry, names)
        self._report(self._total or 1, self._total or 1)
        return str(self.folder)

    # -- entry metadata -------------------------------------------------------------------------------------
    def _what(self) -> str:
        return f"{self.repo_id!r} from {self.hub}"

    def _read_entry(self) -> dict[str, Any]:
        try:
            data = json.loads((self._meta_dir / "entry.json").read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("files"), dict):
                return data
        except (OSError, ValueError):
            pass
        return {"hub": self.hub, "repo_id": self.repo_id, "revision": self.revision or "main", "commit": None,
                "model_names": [], "files": {}, "snapshot": None}

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

    # -- progress and cancellation ---------------------------------------------------------------------------
    def _report(self, done: int, total: int) -> None:
        if self._progress is not None:
            self._progress(done, total)

    def _check_cancel(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise LaunchFailed(f"the download of {self._what()} was cancelled")

    def _check_online(self) -> None:
        self._check_cancel()
        if self.hub == "huggingface" and hub_offline():
            raise LaunchFailed(
                f"cannot download {self.repo_id!r}: HF_HUB_OFFLINE is set and it is not in the cache "
                f"({self.folder.parent.parent.name}/{self.folder.parent.name}); download it once online, or launch "
                "with model_path pointing at local weights"
            )

    # -- Hugging Face ------------------------------------------------------------------------------------------
    def _unreachable(self, exc: BaseException) -> LaunchFailed:
        return LaunchFailed(
            f"cannot reach {self.hub} ({hf_endpoint()}) to download {self.repo_id!r} (offline?): "
            f"{type(exc).__name__}: {exc}. Set HF_ENDPOINT to a reachable mirror, use XINFERENCE_MODEL_SRC / "
            "download_hub to pick another hub, or launch with model_path"
        )

    def _http_failure(self, status: int | None, what: str, exc: BaseException | None = None) -> LaunchFailed:
        if status in (401, 403):
            why = "needs an access token (set HF_TOKEN) or is gated: accept its license on the hub first"
        elif status == 404:
            why = "was not found on the hub (check the repository id, revision and file name)"
        else:
            why = f"failed with HTTP {status}" + (f": {exc}" if exc else "")
        return LaunchFailed(f"downloading {what} from {self.repo_id!r} ({self.hub}) {why}")

    def _hf_locate(self, filename: str, entry: dict[str, Any]) -> tuple[str, str, int | None]:
        """(download URL, etag, size) of one file, from a HEAD on the hub."""
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.utils import HfHubHTTPError  # type: ignore[attr-defined,unused-ignore]

        url = hf_hub_url(self.repo_id, filename, revision=self.revision, endpoint=hf_endpoint())
        try:
            meta = get_hf_file_metadata(url, timeout=_connect_timeout())
        except HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            raise self._http_failure(status, repr(filename), exc) from None
        except Exception as exc:  # noqa: BLE001 - any other failure here is the network (requests/httpx types vary)
            raise self._unreachable(exc) from None
        if meta.commit_hash:
            entry["commit"] = meta.commit_hash
        return meta.location, (meta.etag or "noetag").strip('"'), meta.size

    def _hf_list(self) -> dict[str, int | None]:
        """Every file of the revision (path -> size), following the listing's pages."""
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined,unused-ignore]

        revision = quote(self.revision or "main", safe="")
        url: str | None = f"{hf_endpoint()}/api/models/{self.repo_id}/tree/{revision}"
        params: dict[str, str] | None = {"recursive": "true"}
        files: dict[str, int | None] = {}
        with self._client() as client:
            while url:
                try:
                    response = client.get(url, params=params, headers=build_hf_headers())
                except httpx.HTTPError as exc:
                    raise self._unreachable(exc) from None
                if response.status_code != 200:
                    raise self._http_failure(response.status_code, "the file list")
                for item in response.json():
                    if item.get("type") == "file":
                        lfs = item.get("lfs") or {}
                        files[str(item["path"])] = lfs.get("size") or item.get("size")
                url, params = response.links.get("next", {}).get("url"), None
        return files

    def _client(self) -> httpx.Client:
        timeout = httpx.Timeout(_read_timeout(), connect=_connect_timeout())
        return httpx.Client(follow_redirects=True, timeout=timeout)

    def _transfer(self, filename: str, url: str, etag: str, size: int | None) -> None:
        """Fetch ``url`` into the cache, continuing a partial file of the same etag; retries dropped transfers."""
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined,unused-ignore]

        dest = _inside(self.folder, filename)
        partial_dir = self._meta_dir / "partial"
        partial_dir.mkdir(parents=True, exist_ok=True)
        flat = filename.replace("/", "--")
        partial = partial_dir / f"{flat}.{re.sub(r'[^0-9A-Za-z]', '', etag)[:24]}.incomplete"
        for stale in partial_dir.glob(f"{flat}.*.incomplete"):
            if stale != partial:
                stale.unlink(missing_ok=True)  # an older version of the file: its bytes are useless now
        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
        self._file_size = size
        if self._file_progress is not None:
            self._file_progress(filename, partial.stat().st_size if partial.exists() else 0, size)
        stalled = 0
        with self._client() as client:
            while True:
                self._check_cancel()
                offset = partial.stat().st_size if partial.exists() else 0
                if size is not None and offset > size:
                    partial.unlink()
                    offset = 0
                if size is not None and offset == size:
                    break
                try:
                    self._get(client, url, headers, partial, offset, filename)
                except httpx.TransportError as exc:
                    grown = (partial.stat().st_size if partial.exists() else 0) > offset
                    stalled = 0 if grown else stalled + 1
                    if stalled >= MAX_STALLED_ATTEMPTS:
                        raise self._unreachable(exc) from None
                    logger.warning("download of %s interrupted (%s); resuming", filename, exc)
                    time.sleep(0.2 * stalled)
                    continue
                if size is None:
                    break
                if partial.stat().st_size < size:  # the body ended early without a transport error
                    stalled += 1
                    if stalled >= MAX_STALLED_ATTEMPTS:
                        raise LaunchFailed(f"the hub keeps sending {filename!r} short; retry later")
        self._verify(partial, etag, filename)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, dest)

    def _get(
        self, client: httpx.Client, url: str, headers: dict[str, str], partial: Path, offset: int, filename: str
    ) -> None:
        request_headers = dict(headers)
        if offset:
            request_headers["Range"] = f"bytes={offset}-"
        with client.stream("GET", url, headers=request_headers) as response:
            if response.status_code == 416:  # our partial is no prefix of the file: start over
                partial.unlink(missing_ok=True)
                return
            if response.status_code >= 400:
                raise self._http_failure(response.status_code, repr(filename))
            if offset and response.status_code != 206:
                offset = 0  # the server ignored the Range: the body is the whole file
            with partial.open("ab" if offset else "wb") as out:
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    self._check_cancel()
                    out.write(chunk)
                    offset += len(chunk)
                    self._report(self._done + offset, self._total)
                    if self._file_progress is not None:
                        self._file_progress(filename, offset, self._file_size)

    @staticmethod
    def _verify(partial: Path, etag: str, filename: str) -> None:
        """Large (LFS) files have their sha256 as etag: check it, and drop a corrupt file."""
        if not _SHA256.fullmatch(etag):
            return
        digest = hashlib.sha256()
        with partial.open("rb") as handle:
            for block in iter(lambda: handle.read(CHUNK_BYTES * 4), b""):
                digest.update(block)
        if digest.hexdigest() != etag:
            partial.unlink(missing_ok=True)
            raise LaunchFailed(f"the download of {filename!r} is corrupt (sha256 mismatch); launch again to retry")

    # -- ModelScope ------------------------------------------------------------------------------------------
    def _modelscope(
        self, entry: dict[str, Any], files: list[str] | None, wanted: Callable[[list[str]], list[str]] | None = None
    ) -> None:
        try:
            import modelscope  # noqa: F401
            from modelscope.hub.api import HubApi
            from modelscope.hub.file_download import model_file_download
            from modelscope.hub.snapshot_download import snapshot_download
        except ImportError:
            raise LaunchFailed(
                f"{self.repo_id!r} is to be downloaded from ModelScope, which needs the modelscope package on this "
                "worker: pip install 'xinference[modelscope]'"
            ) from None
        revision = self.revision or "master"
        self._report(0, 0)
        try:
            if files is not None:
                for name in files:
                    self._check_cancel()
                    model_file_download(self.repo_id, name, revision=revision, local_dir=str(self.folder))
            else:
                listing = [f["Path"] for f in HubApi().get_model_files(self.repo_id, revision=revision, recursive=True)
                           if f.get("Type") != "tree"]
                files = wanted(listing) if wanted else listing
                snapshot_download(self.repo_id, revision=revision, local_dir=str(self.folder), allow_patterns=files)
                entry["snapshot"] = files
        except LaunchFailed:
            raise
        except Exception as exc:  # noqa: BLE001 - modelscope raises many types; the text is what matters
            raise LaunchFailed(f"downloading {self._what()} failed: {type(exc).__name__}: {exc}") from None
        for name in files:
            path = self.folder / name
            if path.is_file():
                entry["files"][name] = {"size": path.stat().st_size, "etag": None}
        self._remember(entry, [])
        self._report(1, 1)
