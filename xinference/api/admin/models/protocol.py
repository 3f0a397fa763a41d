"""Request model of ``POST /v1/models`` (launch), compatible with the official Xinference client.

That client sends every optional field, most as ``null``. Null (or the neutral value) is accepted; a value the
platform cannot honour yet is a 400 that names the field. Fields this model does not know are the engine's launch
options (``n_ctx=4096``) and are validated by the engine's own config.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xinference.api.admin.models.launch_fields import GpuIdx, KeepAlive, ModelSize, NGpu, refuse
from xinference.api.admin.registrations import MODEL_TYPES
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.core.launch import LAUNCH_FIELDS
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.model.spec import validate_model_name

__all__ = ["AddReplicasRequest", "LaunchModelRequest", "ModelCard", "ModelList", "ReplicaConfig", "ReplicaDevice"]

#: Replicas one request may ask for (a launch's, or a scale-up's).
MAX_REPLICAS = 64
#: Longest engine, format or quantization name (the catalog's are under 30 characters).
_NAME_MAX = 100
#: ``max_queued`` beyond which a value is a mistake (each waiting request holds a connection).
MAX_QUEUED = 1_000_000
#: ``queue_timeout`` beyond which a value is a mistake: a day.
MAX_QUEUE_TIMEOUT = 86400.0

#: Official-client fields that must be null (or neutral) for now, with why.
_NOT_YET: dict[str, str] = {
    "peft_model_config": "LoRA adapters are not supported yet",
    "request_limits": "per-model request limits are not supported yet",
    "replica_config": "per-replica placement arrives with multi-node clusters",
    "enable_thinking": "thinking control is not supported yet",
    "enable_virtual_env": "per-model virtual environments are not supported",
    "virtual_env_packages": "per-model virtual environments are not supported",
    "virtual_env_find_links": "per-model virtual environments are not supported",
    "envs": "per-model environment variables are not supported yet",
}
_NEUTRAL: tuple[Any, ...] = (None, False, [], {}, "")
_MCP_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class LaunchModelRequest(OpenAIRequest):
    """``POST /v1/models``.

    Platform fields take exactly their JSON types (strict: ``"2"``, ``2.0`` or ``true`` is no replica count) and
    ranges; a wrong one is a 400 naming it before anything is decided. Unknown fields are the engine's options.
    """

    model_config = ConfigDict(extra="allow", protected_namespaces=())
    log_extra_fields = False  # extra fields are engine launch options, validated by the engine

    model_name: str = Field(min_length=1, strict=True)
    model_type: str = Field(default="LLM", strict=True, description=f"one of {', '.join(MODEL_TYPES)}")
    model_engine: str | None = Field(default=None, min_length=1, max_length=_NAME_MAX, strict=True)
    model_uid: str | None = Field(default=None, strict=True)
    model_format: str | None = Field(default=None, min_length=1, max_length=_NAME_MAX, strict=True)
    model_size_in_billions: ModelSize = None
    quantization: str | None = Field(default=None, min_length=1, max_length=_NAME_MAX, strict=True)
    replica: int = Field(default=1, ge=1, le=MAX_REPLICAS, strict=True)
    n_worker: int | None = Field(default=1, ge=1, le=MAX_REPLICAS, strict=True)
    n_gpu: NGpu = "auto"
    # -- platform launch fields (not engine options)
    ignore_memory_check: bool = Field(
        default=False, strict=True, description="launch even if the memory estimate says no"
    )
    # -- where the weights come from: a local path on the worker (overrides the spec), or the hub to download from
    worker_ip: str | None = Field(
        default=None, max_length=300, strict=True, description="host or host:port of the worker"
    )
    gpu_idx: GpuIdx = None
    model_path: str | None = Field(default=None, strict=True)
    download_hub: Literal["huggingface", "modelscope"] | None = None
    # -- operations: unload when idle, bounded queue, come back after a restart (see doc/operations.md)
    keep_alive: KeepAlive = Field(
        default=None, description="stay loaded this long after the last request: '10m', seconds, -1 forever, 0"
    )
    max_queued: int | None = Field(
        default=None, ge=0, le=MAX_QUEUED, strict=True, description="requests that may wait for a slot; then 429"
    )
    queue_timeout: float | None = Field(
        default=None,
        gt=0,
        le=MAX_QUEUE_TIMEOUT,
        strict=True,
        allow_inf_nan=False,
        description="seconds a request may wait for a slot",
    )
    autostart: bool = Field(default=False, strict=True, description="launch again when the server restarts")
    # -- MCP (doc/mcp.md): the servers whose tools chat requests without tools of their own get
    mcp_servers: list[str] | Literal["*"] | None = Field(
        default=None, description='configured MCP server names, or "*" for all of them'
    )

    @field_validator("mcp_servers")
    @classmethod
    def _mcp_servers(cls, value: list[str] | str | None) -> list[str] | str | None:
        if isinstance(value, list):
            if len(value) > 64:
                raise refuse("at most 64 MCP servers")
            for name in value:
                if not _MCP_NAME.match(name):
                    raise refuse(f"invalid MCP server name {name[:80]!r}: use 1-64 letters, digits, '_' or '-'")
            return value or None
        return value

    @field_validator("model_path")
    @classmethod
    def _model_path(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if "\0" in value or not value.startswith("/"):
            raise ValueError("model_path must be an absolute path on the worker")
        return value

    @field_validator("model_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_model_name(value)

    @field_validator("model_type")
    @classmethod
    def _type(cls, value: str) -> str:
        known = next((t for t in MODEL_TYPES if t.lower() == value.lower()), None)
        if known is None:
            raise refuse(f"unknown model type {value[:40]!r}; use one of {', '.join(MODEL_TYPES)}")
        return known

    @field_validator("model_uid")
    @classmethod
    def _uid(cls, value: str | None) -> str | None:
        return None if value is None else validate_model_name(value, "model_uid")

    def to_launch(self) -> dict[str, Any]:
        """The supervisor's launch dict; raises UnsupportedOption for options set that are not supported yet."""
        extra = dict(self.model_extra or {})
        for field, why in _NOT_YET.items():
            if field in extra and not any(extra[field] == neutral for neutral in _NEUTRAL):
                raise UnsupportedOption(f"{field} is set but {why}; leave it null", param=field)
            extra.pop(field, None)
        if self.n_worker not in (None, 1):
            raise UnsupportedOption("n_worker > 1 (one model across workers) is not supported", param="n_worker")
        for key in extra:
            # dotted names reach nested engine parameters (llama.cpp's ``sampling.top_k``)
            if not all(part.isidentifier() for part in key.split(".")):
                raise InvalidRequest(f"invalid launch option name {key[:60]!r}", param=key)
        launch = {name: getattr(self, name) for name in LAUNCH_FIELDS}  # the one list: core/launch.py
        return {**launch, "engine_kwargs": extra, "worker_ip": self.worker_ip or None}


class _Closed(BaseModel):
    """A nested object of a request: a key it does not have is refused with the keys it has (what a client needs
    to fix the call), not pydantic's bare "Extra inputs are not permitted"."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                raise refuse(f"unknown field {str(unknown[0])[:40]!r}; the fields are: {', '.join(cls.model_fields)}")
        return data


class ReplicaDevice(_Closed):
    """One device of a ``replica_config`` (the official client's shape); only ``worker_ip`` is honoured."""

    worker_ip: str = Field(min_length=1, max_length=300, strict=True, description="host or host:port of the worker")
    n_gpu: NGpu = None
    gpu_idx: GpuIdx = None


class ReplicaConfig(_Closed):
    """Where one new replica goes: ``{"replica_uid": null, "devices": [{"worker_ip": "host:port"}]}``."""

    replica_uid: str | None = Field(default=None, strict=True)
    devices: list[ReplicaDevice] = Field(default_factory=list, max_length=MAX_REPLICAS)


class AddReplicasRequest(BaseModel):
    """``POST /v1/models/{uid}/replicas`` (the official client's scale-up payload).

    Unknown fields are kept only to be refused with the known ones named (see :meth:`worker_ip`)."""

    model_config = ConfigDict(extra="allow")

    replica: int = Field(default=1, ge=1, le=MAX_REPLICAS, strict=True)
    n_gpu: NGpu = "auto"
    model_engine: str | None = Field(default=None, strict=True)
    replica_config: list[ReplicaConfig] | None = Field(
        default=None, max_length=MAX_REPLICAS, description="one config, or a list of them (one device in all)"
    )

    @field_validator("replica_config", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, (dict, list)):
            raise refuse('replica_config is {"devices": [{"worker_ip": "host:port"}]}, a list of those, or null')
        return [value] if isinstance(value, dict) else value

    def worker_ip(self) -> str | None:
        """The worker named by a one-device ``replica_config``, if any; other placement fields are refused."""
        for name in self.model_extra or {}:
            fields = ", ".join(type(self).model_fields)
            raise InvalidRequest(f"unknown field {name[:40]!r}; the fields are: {fields}", param=name)
        if self.model_engine is not None:
            raise UnsupportedOption("new replicas run the model's own engine", param="model_engine")
        if self.replica_config is None:
            return None
        devices = [d for c in self.replica_config for d in c.devices]
        if len(devices) != 1:
            raise UnsupportedOption(
                f"replica_config names {len(devices)} devices; it may only name one worker_ip", param="replica_config"
            )
        for config in self.replica_config:
            if config.replica_uid is not None:
                raise UnsupportedOption(
                    "replica_uid cannot be chosen: replicas are named <model_uid>-<n>", param="replica_config"
                )
        device = devices[0]
        for name in ("n_gpu", "gpu_idx"):
            if getattr(device, name) is not None:
                raise UnsupportedOption(
                    f"replica_config's device may only name worker_ip, not {name}; set n_gpu on the request",
                    param="replica_config",
                )
        return device.worker_ip


class ModelCard(ResponseBody):
    """A running model, as ``GET /v1/models`` lists it and ``GET /v1/models/{uid}`` describes it: OpenAI's fields,
    then what clients size and pick models by; the other Xinference fields follow (see ``model_entry``)."""

    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    # -- Xinference ----------------------------------------------------------------------------------------------
    model_uid: str
    model_type: str
    model_name: str
    model_ability: list[str]
    abilities: list[str] = Field(description="model_ability, plus tools and reasoning where the platform parses them")
    context_length: int | None = Field(description="tokens one request may use on the running model")
    model_context_length: int | None = None
    max_tokens: int | None = Field(default=None, description="embedding and rerank models: the longest input read")
    dimensions: int | None = Field(default=None, description="embedding models: the size of a vector")
    model_engine: str
    engine: str | None = None
    status: str
    replica: int


class ModelList(ResponseBody):
    """The body of ``GET /v1/models``."""

    object: Literal["list"]
    data: list[ModelCard]
