"""The model cache on this node: what is in ``XINFERENCE_HOME/cache``, and removing an entry safely.

An *entry* is one repository revision downloaded from a hub (``huggingface/org--name/main``) or the weights a
bundled package built (``bundled/<package>``). Its id is that path relative to the cache root; ``xinference
cached`` lists entries and ``xinference remove-cache`` deletes one by id, or every entry a model name used.
Removal resolves the path and refuses anything that is not an entry folder strictly inside the cache root.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from xinference import settings
from xinference.errors import InvalidRequest, ModelNotFound
from xinference.model.hub import HUBS, META_DIR

__all__ = ["list_entries", "remove_entry"]


def _size_and_files(folder: Path) -> tuple[int, list[str], int]:
    """(bytes on disk, finished files relative to ``folder``, bytes in unfinished transfers)."""
    total, partial, files = 0, 0, []
    for root, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            try:
                size = path.stat().st_size
            except OSError:
                continue
            total += size
            relative = path.relative_to(folder).as_posix()
            if relative.startswith(f"{META_DIR}/"):
                partial += size if name.endswith(".incomplete") else 0
                continue
            files.append(relative)
    return total, sorted(files), partial


def _hub_entry(root: Path, folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / META_DIR / "entry.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        meta = {}
    size, files, partial = _size_and_files(folder)
    hub, repo, revision = folder.relative_to(root).parts
    return {
        "id": folder.relative_to(root).as_posix(),
        "hub": hub,
        "repo_id": meta.get("repo_id") or repo.replace("--", "/", 1),
        "revision": meta.get("revision") or revision,
        "commit": meta.get("commit"),
        "model_names": list(meta.get("model_names") or []),
        "files": files,
        "size_bytes": size,
        "partial_bytes": partial,
        "updated": meta.get("updated"),
        "path": str(folder),
    }


def list_entries(model_name: str | None = None) -> list[dict[str, Any]]:
    """Every cache entry of this node (optionally only those ``model_name`` was launched from), sorted by id."""
    root = settings.cache_dir()
    entries: list[dict[str, Any]] = []
    for hub in HUBS:
        for repo in sorted((root / hub).glob("*")) if (root / hub).is_dir() else ():
            for revision in sorted(p for p in repo.glob("*") if p.is_dir()):
                entries.append(_hub_entry(root, revision))
    bundled = root / "bundled"
    for package in sorted(p for p in bundled.glob("*") if p.is_dir()) if bundled.is_dir() else ():
        size, files, partial = _size_and_files(package)
        entries.append(
            {
                "id": f"bundled/{package.name}",
                "hub": "bundled",
                "repo_id": package.name,
                "revision": None,
                "commit": None,
                "model_names": [],
                "files": files,
                "size_bytes": size,
                "partial_bytes": partial,
                "updated": None,
                "path": str(package),
            }
        )
    if model_name is not None:
        entries = [e for e in entries if model_name in e["model_names"]]
    return entries


def _entry_folder(entry_id: str) -> Path:
    """The folder of an entry id, checked to be an entry strictly inside the cache root."""
    parts = entry_id.strip("/").split("/")
    depth = 2 if parts[0] == "bundled" else 3
    if (
        "\0" in entry_id
        or len(parts) != depth
        or parts[0] not in (*HUBS, "bundled")
        or any(p in ("", ".", "..") for p in parts)
    ):
        raise InvalidRequest(
            f"invalid cache entry id {entry_id[:200]!r}; `xinference cached` lists the ids", param="entry"
        )
    root = settings.cache_dir().resolve()
    folder = root.joinpath(*parts).resolve()
    if folder.parent == root or not folder.is_relative_to(root) or len(folder.relative_to(root).parts) != depth:
        raise InvalidRequest(f"cache entry {entry_id!r} is outside the cache", param="entry")
    if not folder.is_dir():
        raise ModelNotFound(f"there is no cache entry {entry_id!r} on this node", param="entry")
    return folder


def remove_entry(entry_id: str) -> dict[str, Any]:
    """Delete one entry (its files and partial transfers); returns what was removed (id, bytes freed)."""
    folder = _entry_folder(entry_id)
    size, _files, _partial = _size_and_files(folder)
    shutil.rmtree(folder)
    parent = folder.parent
    if parent.name not in (*HUBS, "bundled") and not any(parent.iterdir()):
        parent.rmdir()  # the repository folder held only this revision
    return {"id": entry_id, "freed_bytes": size}
