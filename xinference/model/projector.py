"""The multimodal projector (``mmproj``) of a GGUF vision model: chosen at launch, fetched beside the weights.

A GGUF vision model ships as two files: the language model and a projector holding the vision tower and the layers
that map its output into the language model's embeddings. Xinference names the projectors a spec offers in
``multimodal_projectors`` and lets a launch pick one with ``multimodal_projector``; so does this platform:

1. **Launch (supervisor)**: :func:`plan_projector` takes ``multimodal_projector`` out of the engine options (it is a
   launch field, never an engine option). Unset, a vision family gets its spec's first projector; a name must be one
   of the spec's; an absolute path names a file on the worker (a local GGUF's own projector); ``""`` launches the
   model without one (text only). An engine that cannot load a projector refuses a request for one with a 400
   naming the field. The chosen projector travels in every replica's launch plan.
2. **Model process**: :func:`resolve_projector` finds the file where the weights are: downloaded from the same
   repository revision into the same cache folder, or beside a local GGUF (``model_path``, ``model_uri``, a bundled
   package), or at its absolute path. A projector that is not there is a LaunchFailed naming it.
3. **Engine**: an engine takes projectors when its config has a ``projector`` field (llama.cpp); the platform sets it
   to the local path, and the engine checks that it fits the model before loading.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

from xinference.errors import InvalidRequest, LaunchFailed

if TYPE_CHECKING:
    from pydantic import BaseModel

    from xinference.model.hub import FileProgressCallback, ProgressCallback
    from xinference.model.registry import SpecChoice
    from xinference.model.spec import ModelSpec

__all__ = [
    "PROJECTOR_LAUNCH_FIELD",
    "engine_takes_projector",
    "plan_projector",
    "resolve_projector",
]

#: The launch field that picks a projector (Xinference's name), removed from the engine options.
PROJECTOR_LAUNCH_FIELD = "multimodal_projector"


def engine_takes_projector(config_class: type[BaseModel]) -> bool:
    """Whether an engine can load a multimodal projector: its config has a ``projector`` option."""
    return "projector" in config_class.model_fields


def plan_projector(
    choice: SpecChoice, engine_name: str, config_class: type[BaseModel], engine_kwargs: dict[str, Any]
) -> tuple[dict[str, Any], str | None]:
    """Split ``multimodal_projector`` off a launch's engine options: ``(engine options left, projector or None)``.

    The projector is a file name of the spec's ``multimodal_projectors`` or an absolute path on the worker. Raises
    InvalidRequest (400) naming the field when the request cannot be honoured; nothing is dropped silently.
    """
    field = PROJECTOR_LAUNCH_FIELD
    if "projector" in engine_kwargs:
        raise InvalidRequest(f"projector is set by the platform; launch with {field} instead", param="projector")
    options = {k: v for k, v in engine_kwargs.items() if k != field}
    spec, family = choice.spec, choice.family
    takes = engine_takes_projector(config_class)
    wanted = engine_kwargs.get(field)
    if wanted is None:  # unset (the official client sends null): a vision family gets its first projector
        if takes and spec.multimodal_projectors and "vision" in family.model_ability:
            return options, spec.multimodal_projectors[0]
        return options, None
    if not isinstance(wanted, str):
        raise InvalidRequest(f"{field} must be a projector file name or an absolute path", param=field)
    if wanted == "":
        return options, None  # asked for the model without its projector: text only
    if not takes:
        raise InvalidRequest(
            f"{engine_name} cannot load a multimodal projector, so {field} cannot be honoured; launch GGUF weights "
            "with llama.cpp, or leave it unset",
            param=field,
        )
    if "vision" not in family.model_ability:
        raise InvalidRequest(
            f"{family.model_name} does not have the vision ability, so a projector would never see an image; "
            "register the model with model_ability containing vision, or leave multimodal_projector unset",
            param=field,
        )
    if wanted in spec.multimodal_projectors:
        return options, wanted
    if "\0" not in wanted and os.path.isabs(wanted):
        return options, os.path.normpath(wanted)
    offered = ", ".join(spec.multimodal_projectors) or "none"
    raise InvalidRequest(
        f"{field} {wanted[:200]!r} is not a projector of {family.model_name} {spec.size} {spec.model_format} "
        f"(it offers: {offered}); name one of them or give an absolute path on the worker",
        param=field,
    )


def resolve_projector(
    spec: ModelSpec,
    projector: str,
    weights_path: str,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    *,
    download_hub: str | None = None,
    model_path: str | None = None,
    model_name: str | None = None,
    file_progress: FileProgressCallback | None = None,
) -> str:
    """The local path of ``projector`` for weights resolved at ``weights_path`` (the model process calls this right
    after :func:`~xinference.model.download.resolve_model_path`). Hub weights get their projector from the same
    repository revision (downloaded unless cached); local weights must have it beside them."""
    if os.path.isabs(projector):
        if not os.path.isfile(projector):
            raise LaunchFailed(f"the multimodal projector {projector!r} does not exist on this worker")
        return projector
    if not (model_path or spec.bundled is not None or spec.model_uri is not None):
        from xinference.model.download import spec_download

        return spec_download(spec, download_hub, progress, cancel, model_name, file_progress).file(projector)
    folder = weights_path if os.path.isdir(weights_path) else os.path.dirname(weights_path)
    path = os.path.normpath(os.path.join(folder, projector))
    if os.path.dirname(path) != os.path.normpath(folder) and not path.startswith(os.path.normpath(folder) + os.sep):
        raise LaunchFailed(f"the multimodal projector {projector!r} is outside the weights' folder")
    if not os.path.isfile(path):
        raise LaunchFailed(
            f"the multimodal projector {projector!r} is not beside the weights ({os.path.basename(weights_path)}); "
            "put it in the same folder, or launch with multimodal_projector set to its absolute path"
        )
    return path
