"""Custom model registrations persisted under ``XINFERENCE_HOME/registrations/<type>/<name>.json``.

Files are written atomically (a temporary file, fsync, rename), so a crash never leaves half a registration, and
they are reloaded when the supervisor starts. A file that no longer validates is skipped with a warning rather
than stopping the server. ``from_xinference_json`` turns the original Xinference's registration JSON (versions 1
and 2, as its docs and old deployments write it) into this platform's schema before validation.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from pydantic import ValidationError

from xinference.errors import InvalidRequest
from xinference.model.spec import ModelFamily, validate_model_name

__all__ = ["RegistrationStore", "from_xinference_json"]

logger = logging.getLogger(__name__)


class RegistrationStore:
    """The folder of persisted registrations."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, model_type: str, model_name: str) -> Path:
        # Both parts are validated names: no separator, no "..", so the path stays under root.
        validate_model_name(model_name)
        return self.root / model_type.lower() / f"{model_name}.json"

    def load(self) -> list[ModelFamily]:
        families = []
        for path in sorted(self.root.glob("*/*.json")):
            try:
                families.append(ModelFamily.model_validate_json(path.read_text(encoding="utf-8")))
            except (OSError, ValidationError, ValueError) as exc:
                logger.warning("skipping the unreadable registration %s: %s", path.name, exc)
        return families

    def save(self, family: ModelFamily) -> None:
        path = self._path(family.model_type, family.model_name)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.dumps(family.model_dump(mode="json", exclude_defaults=True), indent=2)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def delete(self, model_type: str, model_name: str) -> None:
        self._path(model_type, model_name).unlink(missing_ok=True)


# -- Xinference's registration JSON -------------------------------------------------------------------------------
#: Family fields of Xinference's JSON kept as given (nothing here acts on them; they read back with the registration)
_KEPT_FAMILY = ("model_family", "virtualenv", "cache_config", "type")
#: Family fields of Xinference's JSON that the server computes itself: dropped
_DROPPED_FAMILY = ("is_builtin",)
#: Spec fields of Xinference's JSON kept as given
_KEPT_SPEC = ("activated_size_in_billions", "model_file_name_split_template", "quantization_parts", "model_engine")
#: Family fields copied from the built-in family ``model_family`` names when the registration leaves them out
_INHERITED = (
    "chat_template",
    "stop",
    "stop_token_ids",
    "tool_call_format",
    "reasoning_start_tag",
    "reasoning_end_tag",
    "architectures",
)
_HUBS = ("huggingface", "modelscope")
_DEFAULT_ABILITY = {"embedding": ["embed"], "rerank": ["rerank"]}
#: Family fields of Xinference's audio JSON kept as given (its engine choice, cache name, default configs, ...)
_KEPT_AUDIO = ("engine", "cache_name", "default_model_config", "default_transcription_config", "updated_at", "featured")
#: Fields of Xinference's flat audio JSON that describe its one spec (the audio schema has no ``model_specs``)
_AUDIO_SPEC = (
    "model_id",
    "model_revision",
    "model_uri",
    "model_src",
    "model_hub",
    "model_format",
    "quantization",
    "quantizations",
    "model_size_in_billions",
)
#: Xinference's speech-to-text families (their registrations may leave ``model_ability`` out)
_SPEECH_TO_TEXT_FAMILIES = ("whisper", "funasr")
#: Family fields of Xinference's image JSON kept as given (ControlNets, its default configs, GGUF and Lightning
#: variants of its other engines): read back with the registration, not acted on here
_KEPT_IMAGE = (
    "controlnet",
    "default_model_config",
    "default_generate_config",
    "cache_config",
    "updated_at",
    "featured",
    "gguf_model_id",
    "gguf_quantizations",
    "gguf_model_file_name_template",
    "lightning_model_id",
    "lightning_versions",
    "lightning_model_file_name_template",
)


def from_xinference_json(
    data: Mapping[str, Any], model_type: str, builtin: Callable[[str], ModelFamily | None] | None = None
) -> dict[str, Any]:
    """Translate a registration written for the original Xinference into this platform's family schema.

    Called on every registration before validation, so users can paste the JSON of Xinference's docs or of an old
    deployment: ``"version": 1`` (``quantizations`` per spec) and ``"version": 2`` (one ``quantization`` per spec,
    ``model_hub``, ``model_src``), ``language`` for ``model_lang``, ``tool_parser``, nulls for "not set". Fields that
    mean something here are mapped; fields that do not (``virtualenv``, ``cache_config``, ...) go to ``kept_fields``;
    anything else is left in place, so the strict schema refuses it with its name. ``model_family`` naming a
    built-in family lends that family's chat template, stops, tool-call format and reasoning tags when the
    registration gives none. Raises ``InvalidRequest`` for a version or hub it cannot honour.
    """
    family = {k: v for k, v in data.items() if v is not None or k in ("model_specs", "model_name")}
    version = family.pop("version", None)
    if version not in (None, 1, 2):
        raise InvalidRequest(f"unknown registration version {version!r}; Xinference's are 1 and 2", param="version")
    for name in _DROPPED_FAMILY:
        family.pop(name, None)
    kept = dict(family.pop("kept_fields", None) or {})
    kept.update({name: family.pop(name) for name in _KEPT_FAMILY if name in family})
    if model_type == "audio":
        _flat_audio(family, kept)
    elif model_type == "image":
        _flat_image(family, kept)
    if "language" in family and "model_lang" not in family:
        language = family.pop("language")
        family["model_lang"] = [language] if isinstance(language, str) else language
    if "model_ability" not in family and model_type in _DEFAULT_ABILITY:
        family["model_ability"] = list(_DEFAULT_ABILITY[model_type])
    parser = family.pop("tool_parser", None)
    if parser is not None and "tool_call_format" not in family:
        if _known_tool_format(parser):
            family["tool_call_format"] = parser
        else:
            kept["tool_parser"] = parser  # a parser of Xinference's this platform has no format for
    base = builtin(kept["model_family"]) if builtin and isinstance(kept.get("model_family"), str) else None
    if base is not None:
        for name in _INHERITED:
            value = getattr(base, name)
            if name not in family and value:
                family[name] = value
    specs = family.get("model_specs")
    if isinstance(specs, list):
        family["model_specs"] = _merge_quantizations([_spec(s, i, model_type) for i, s in enumerate(specs)])
    if kept:
        family["kept_fields"] = kept
    return family


def _flat_audio(family: dict[str, Any], kept: dict[str, Any]) -> None:
    """Xinference's audio JSON is flat: one model per entry, its source (``model_id``, ``model_src``, ``model_uri``)
    beside the family's fields. Those become the family's one spec (``pytorch`` and quantization ``none`` unless it
    says otherwise, size 0 as Xinference gives none); its engine and default configs are kept as given."""
    kept.update({name: family.pop(name) for name in _KEPT_AUDIO if name in family})
    if "model_ability" not in family and str(kept.get("model_family", "")).lower() in _SPEECH_TO_TEXT_FAMILIES:
        family["model_ability"] = ["audio2text"]
    if "model_specs" in family:
        return
    spec = {name: family.pop(name) for name in _AUDIO_SPEC if name in family}
    spec.setdefault("model_format", "pytorch")
    spec.setdefault("model_size_in_billions", 0)
    if "quantization" not in spec and "quantizations" not in spec:
        spec["quantizations"] = ["none"]
    family["model_specs"] = [spec]


def _flat_image(family: dict[str, Any], kept: dict[str, Any]) -> None:
    """Xinference's image JSON is flat like its audio JSON: its source (``model_id``, ``model_src``, ``model_uri``)
    becomes the family's one spec, a ``diffusers`` pipeline folder with quantization ``none`` (size 0: the JSON gives
    none) unless it says otherwise; ``text2image`` when it names no ability; its other engines' fields are kept."""
    kept.update({name: family.pop(name) for name in _KEPT_IMAGE if name in family})
    family.setdefault("model_ability", ["text2image"])
    if "model_specs" in family:
        return
    spec = {name: family.pop(name) for name in _AUDIO_SPEC if name in family}
    spec.setdefault("model_format", "diffusers")
    spec.setdefault("model_size_in_billions", 0)
    if "quantization" not in spec and "quantizations" not in spec:
        spec["quantizations"] = ["none"]
    family["model_specs"] = [spec]


def _known_tool_format(name: object) -> bool:
    from xinference.model.parsers.registry import TOOL_CALL_FORMATS

    return isinstance(name, str) and name.lower() in TOOL_CALL_FORMATS


def _spec(raw: object, index: int, model_type: str) -> object:
    if not isinstance(raw, dict):
        return raw  # the schema says what is wrong with it
    spec = {k: v for k, v in raw.items() if v is not None}
    kept = dict(spec.pop("kept_fields", None) or {})
    kept.update({name: spec.pop(name) for name in _KEPT_SPEC if name in spec})
    if "quantization" in spec and "quantizations" not in spec:
        quantization = spec.pop("quantization")
        spec["quantizations"] = [quantization] if isinstance(quantization, str) else quantization
    if "model_size_in_billions" not in spec and model_type in _DEFAULT_ABILITY:
        spec["model_size_in_billions"] = 0  # Xinference's embedding and rerank specs carry no size
    sources = spec.pop("model_src", None)
    if isinstance(sources, dict):
        _from_model_src(spec, sources, index)
    elif sources is not None:
        spec["model_src"] = sources  # refused by the schema, with its name
    hub = spec.pop("model_hub", None)
    if hub is not None:
        _place_hub_id(spec, str(hub), index)
    uri = spec.get("model_uri")
    if isinstance(uri, str) and uri.startswith("/"):
        spec["model_uri"] = "file://" + uri  # Xinference also takes a bare absolute path
    if kept:
        spec["kept_fields"] = kept
    return spec


def _place_hub_id(spec: dict[str, Any], hub: str, index: int) -> None:
    """``model_hub`` says which hub ``model_id`` belongs to."""
    hub = hub.lower()
    if hub not in _HUBS:
        if spec.get("model_uri"):
            kept: dict[str, Any] = spec.setdefault("kept_fields", {})
            kept["model_hub"] = hub  # weights are local: the hub does not matter
            return
        raise InvalidRequest(
            f"model_specs.{index}.model_hub {hub!r} is not supported; use huggingface or modelscope, or give a "
            "file:// model_uri",
            param=f"model_specs.{index}.model_hub",
        )
    if hub == "modelscope" and isinstance(spec.get("model_id"), str):
        ids = dict(spec.get("model_hub_ids") or {})
        ids.setdefault("modelscope", spec.pop("model_id"))
        spec["model_hub_ids"] = ids


def _from_model_src(spec: dict[str, Any], sources: dict[str, Any], index: int) -> None:
    """Xinference's per-hub ``model_src``: {hub: {model_id, quantizations, model_revision, file template}}."""
    ids = dict(spec.get("model_hub_ids") or {})
    for hub, source in sources.items():
        where = f"model_specs.{index}.model_src.{hub}"
        if hub not in _HUBS or not isinstance(source, dict):
            raise InvalidRequest(
                f"{where}: use huggingface or modelscope with an object of model_id, quantizations, ...", param=where
            )
        if isinstance(source.get("model_id"), str):
            ids[hub] = source["model_id"]
        for name in ("quantizations", "model_file_name_template", "model_revision", "multimodal_projectors"):
            value = source.get(name)
            if value is not None and name not in spec and (hub == "huggingface" or name == "quantizations"):
                spec[name] = value
        projectors = source.get("multimodal_projectors")  # the same files on every hub: any hub's list will do
        if projectors is not None and "multimodal_projectors" not in spec:
            spec["multimodal_projectors"] = projectors
        if hub == "huggingface" and "model_id" not in spec and isinstance(source.get("model_id"), str):
            spec["model_id"] = source["model_id"]
    if ids:
        spec["model_hub_ids"] = ids


def _merge_quantizations(specs: list[object]) -> list[object]:
    """Version 2 writes one spec per quantization: specs that differ only in it become one with them all."""
    merged: list[object] = []
    index: dict[str, dict[str, Any]] = {}
    for spec in specs:
        quantizations = spec.get("quantizations") if isinstance(spec, dict) else None
        if not isinstance(spec, dict) or not isinstance(quantizations, list):
            merged.append(spec)
            continue
        key = json.dumps({k: v for k, v in spec.items() if k != "quantizations"}, sort_keys=True, default=str)
        if key in index:
            known = index[key]["quantizations"]
            known.extend(q for q in quantizations if q not in known)
            continue
        copy = {**spec, "quantizations": list(quantizations)}
        index[key] = copy
        merged.append(copy)
    return merged
