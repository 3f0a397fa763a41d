"""ModelScope, through the optional ``modelscope`` package (``pip install 'xinference[modelscope]'``).

The package does each file's transfer, so progress moves file by file rather than by chunk, and a cancel stops the
download between files. Its default revision is ``master``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xinference.errors import LaunchFailed
from xinference.model.hub.base import RemoteFile

if TYPE_CHECKING:
    from xinference.model.hub.download import HubDownload

__all__ = ["ModelScopeHub"]

DEFAULT_REVISION = "master"


def _api(repo_id: str) -> Any:
    """The ``modelscope.hub`` modules; LaunchFailed with the install hint when the package is missing."""
    try:
        from modelscope.hub import api, file_download
    except ImportError:
        raise LaunchFailed(
            f"{repo_id!r} is to be downloaded from ModelScope, which needs the modelscope package on this worker: "
            "pip install 'xinference[modelscope]'"
        ) from None
    return api, file_download


class ModelScopeHub:
    """Downloads from ModelScope; see the module docstring."""

    name = "modelscope"

    def check_online(self, job: HubDownload) -> None:
        _api(job.repo_id)  # no offline switch of its own; a missing package is what stops a download before it starts

    def list_files(self, repo_id: str, revision: str | None) -> dict[str, int | None]:
        api, _ = _api(repo_id)
        try:
            found = api.HubApi().get_model_files(repo_id, revision=revision or DEFAULT_REVISION, recursive=True)
        except Exception as exc:  # noqa: BLE001 - modelscope raises many types; the text is what matters
            raise LaunchFailed(f"listing {repo_id!r} on modelscope failed: {type(exc).__name__}: {exc}") from None
        return {
            str(f["Path"]): (f.get("Size") if isinstance(f.get("Size"), int) else None)
            for f in found
            if f.get("Type") != "tree"
        }

    def resolve(self, repo_id: str, revision: str | None, filename: str) -> RemoteFile:
        return RemoteFile(filename)  # the package locates the file itself when it fetches it

    def fetch(self, job: HubDownload, remote: RemoteFile) -> None:
        _, file_download = _api(job.repo_id)
        job.check_cancel()
        job.advanced(remote.name, 0, remote.size)
        try:
            file_download.model_file_download(
                job.repo_id, remote.name, revision=job.revision or DEFAULT_REVISION, local_dir=str(job.folder)
            )
        except Exception as exc:  # noqa: BLE001 - modelscope raises many types; the text is what matters
            raise LaunchFailed(
                f"downloading {remote.name!r} of {job.describe()} failed: {type(exc).__name__}: {exc}"
            ) from None
        path = job.path_of(remote.name)
        if path.is_file():
            job.advanced(remote.name, path.stat().st_size, remote.size or path.stat().st_size)
