"""The Hugging Face Hub (or a mirror of it at ``HF_ENDPOINT``).

``huggingface_hub`` locates each file (URL, redirects, token, etag, size, commit); the transfer is ours, because
``hf_hub_download`` deletes its partial file on any failure (so a cancelled launch would start over) and cannot stop
between chunks. A partial file is continued with an HTTP ``Range`` request, both when the connection drops mid-way
(retried here) and on the next launch after a cancel or a crash. ``HF_ENDPOINT``, ``HF_TOKEN`` and
``HF_HUB_OFFLINE`` are read at call time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from xinference.errors import LaunchFailed
from xinference.model.hub.base import CHUNK_BYTES, RemoteFile

if TYPE_CHECKING:
    import httpx

    from xinference.model.hub.download import HubDownload

__all__ = ["DEFAULT_HF_ENDPOINT", "MAX_STALLED_ATTEMPTS", "HuggingFaceHub", "hf_endpoint", "hub_offline"]

logger = logging.getLogger(__name__)

DEFAULT_HF_ENDPOINT = "https://huggingface.co"
#: Failed attempts in a row (no byte received in between) before a transfer gives up.
MAX_STALLED_ATTEMPTS = 3

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


class HuggingFaceHub:
    """Downloads from the Hugging Face Hub; see the module docstring."""

    name = "huggingface"

    # -- the Hub protocol ------------------------------------------------------------------------------------
    def check_online(self, job: HubDownload) -> None:
        if hub_offline():
            raise LaunchFailed(
                f"cannot download {job.repo_id!r}: HF_HUB_OFFLINE is set and it is not in the cache "
                f"({job.folder.parent.parent.name}/{job.folder.parent.name}); download it once online, or launch "
                "with model_path pointing at local weights"
            )

    def list_files(self, repo_id: str, revision: str | None) -> dict[str, int | None]:
        """Every file of the revision (path -> size), following the listing's pages."""
        import httpx
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined,unused-ignore]

        url: str | None = f"{hf_endpoint()}/api/models/{repo_id}/tree/{quote(revision or 'main', safe='')}"
        params: dict[str, str] | None = {"recursive": "true"}
        files: dict[str, int | None] = {}
        with _client() as client:
            while url:
                try:
                    response = client.get(url, params=params, headers=build_hf_headers())
                except httpx.HTTPError as exc:
                    raise _unreachable(repo_id, exc) from None
                if response.status_code != 200:
                    raise _http_failure(repo_id, response.status_code, "the file list")
                for item in response.json():
                    if item.get("type") == "file":
                        lfs = item.get("lfs") or {}
                        files[str(item["path"])] = lfs.get("size") or item.get("size")
                url, params = response.links.get("next", {}).get("url"), None
        return files

    def resolve(self, repo_id: str, revision: str | None, filename: str) -> RemoteFile:
        """Download URL, etag, size and commit of one file, from a HEAD on the hub."""
        from huggingface_hub import get_hf_file_metadata, hf_hub_url
        from huggingface_hub.utils import HfHubHTTPError  # type: ignore[attr-defined,unused-ignore]

        url = hf_hub_url(repo_id, filename, revision=revision, endpoint=hf_endpoint())
        try:
            meta = get_hf_file_metadata(url, timeout=_connect_timeout())
        except HfHubHTTPError as exc:
            status = getattr(getattr(exc, "response", None), "status_code", None)
            raise _http_failure(repo_id, status, repr(filename), exc) from None
        except Exception as exc:  # noqa: BLE001 - any other failure here is the network (requests/httpx types vary)
            raise _unreachable(repo_id, exc) from None
        return RemoteFile(filename, meta.location, (meta.etag or "noetag").strip('"'), meta.size, meta.commit_hash)

    def fetch(self, job: HubDownload, remote: RemoteFile) -> None:
        """Fetch the file into the cache, continuing a partial file of the same etag; retries dropped transfers."""
        import httpx
        from huggingface_hub.utils import build_hf_headers  # type: ignore[attr-defined,unused-ignore]

        assert remote.url is not None  # resolve always gives one
        filename, size, etag = remote.name, remote.size, remote.etag or "noetag"
        dest = job.path_of(filename)
        job.partial_dir.mkdir(parents=True, exist_ok=True)
        flat = filename.replace("/", "--")
        partial = job.partial_dir / f"{flat}.{re.sub(r'[^0-9A-Za-z]', '', etag)[:24]}.incomplete"
        for stale in job.partial_dir.glob(f"{flat}.*.incomplete"):
            if stale != partial:
                stale.unlink(missing_ok=True)  # an older version of the file: its bytes are useless now
        headers = {**build_hf_headers(), "Accept-Encoding": "identity"}
        job.advanced(filename, partial.stat().st_size if partial.exists() else 0, size)
        stalled = 0
        with _client() as client:
            while True:
                job.check_cancel()
                offset = partial.stat().st_size if partial.exists() else 0
                if size is not None and offset > size:
                    partial.unlink()
                    offset = 0
                if size is not None and offset == size:
                    break
                try:
                    self._get(job, client, remote, headers, partial, offset)
                except httpx.TransportError as exc:
                    grown = (partial.stat().st_size if partial.exists() else 0) > offset
                    stalled = 0 if grown else stalled + 1
                    if stalled >= MAX_STALLED_ATTEMPTS:
                        raise _unreachable(job.repo_id, exc) from None
                    logger.warning("download of %s interrupted (%s); resuming", filename, exc)
                    time.sleep(0.2 * stalled)
                    continue
                if size is None:
                    break
                if partial.stat().st_size < size:  # the body ended early without a transport error
                    stalled += 1
                    if stalled >= MAX_STALLED_ATTEMPTS:
                        raise LaunchFailed(f"the hub keeps sending {filename!r} short; retry later")
        _verify(partial, etag, filename)
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(partial, dest)

    # -- one GET ---------------------------------------------------------------------------------------------
    @staticmethod
    def _get(
        job: HubDownload, client: httpx.Client, remote: RemoteFile, headers: dict[str, str], partial: Path, offset: int
    ) -> None:
        assert remote.url is not None
        request_headers = dict(headers)
        if offset:
            request_headers["Range"] = f"bytes={offset}-"
        with client.stream("GET", remote.url, headers=request_headers) as response:
            if response.status_code == 416:  # our partial is no prefix of the file: start over
                partial.unlink(missing_ok=True)
                return
            if response.status_code >= 400:
                raise _http_failure(job.repo_id, response.status_code, repr(remote.name))
            if offset and response.status_code != 206:
                offset = 0  # the server ignored the Range: the body is the whole file
            with partial.open("ab" if offset else "wb") as out:
                for chunk in response.iter_bytes(CHUNK_BYTES):
                    job.check_cancel()
                    out.write(chunk)
                    offset += len(chunk)
                    job.advanced(remote.name, offset, remote.size)


def _client() -> httpx.Client:
    # httpx is imported where a download needs it: it (with the click and rich its CLI pulls in) is ~0.1 s of the
    # platform's start otherwise
    import httpx

    timeout = httpx.Timeout(_read_timeout(), connect=_connect_timeout())
    return httpx.Client(follow_redirects=True, timeout=timeout)


def _unreachable(repo_id: str, exc: BaseException) -> LaunchFailed:
    return LaunchFailed(
        f"cannot reach huggingface ({hf_endpoint()}) to download {repo_id!r} (offline?): "
        f"{type(exc).__name__}: {exc}. Set HF_ENDPOINT to a reachable mirror, use XINFERENCE_MODEL_SRC / "
        "download_hub to pick another hub, or launch with model_path"
    )


def _http_failure(repo_id: str, status: int | None, what: str, exc: BaseException | None = None) -> LaunchFailed:
    if status in (401, 403):
        why = "needs an access token (set HF_TOKEN) or is gated: accept its license on the hub first"
    elif status == 404:
        why = "was not found on the hub (check the repository id, revision and file name)"
    else:
        why = f"failed with HTTP {status}" + (f": {exc}" if exc else "")
    return LaunchFailed(f"downloading {what} from {repo_id!r} (huggingface) {why}")


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
