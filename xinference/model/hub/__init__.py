"""Downloads from model hubs into the platform's cache (one module per hub behind one protocol).

- :mod:`~xinference.model.hub.base`: the :class:`Hub` protocol, the cache layout, progress callback types.
- :mod:`~xinference.model.hub.registry`: hub name -> adapter (``HUBS`` is the list of names).
- :mod:`~xinference.model.hub.download`: :class:`HubDownload`, which drives an adapter for one repository
  revision (cache entry, lock, progress, cancellation, offline use of cached files).
- :mod:`~xinference.model.hub.huggingface` and :mod:`~xinference.model.hub.modelscope`: the adapters.

Local weights (``file://`` URIs, ``model_path``) are not downloaded and never come here: see
:mod:`xinference.model.download`.
"""

from __future__ import annotations

from xinference.model.hub.base import (
    META_DIR,
    FileProgressCallback,
    Hub,
    ProgressCallback,
    RemoteFile,
    cache_folder,
    repo_folder,
    revision_folder,
)
from xinference.model.hub.download import HubDownload
from xinference.model.hub.huggingface import hf_endpoint, hub_offline
from xinference.model.hub.registry import HUB_FACTORIES, HUBS, get_hub

__all__ = [
    "HUBS",
    "HUB_FACTORIES",
    "META_DIR",
    "FileProgressCallback",
    "Hub",
    "HubDownload",
    "ProgressCallback",
    "RemoteFile",
    "cache_folder",
    "get_hub",
    "hf_endpoint",
    "hub_offline",
    "repo_folder",
    "revision_folder",
]
