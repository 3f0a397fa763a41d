"""Request model of ``POST /v1/models`` (launch), compatible with the official Xinference client.

That client sends every optional field, most as ``null``. Null (or the neutral value) is accepted; a value the
platform cannot honour yet is a 400 that names the field. Fields this model does not know are the engine's launch
options (``n_ctx=4096``) and are validated by the engine's own config.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from xinference.api.protocol.common import OpenAIRequest, ResponseBody
from xinference.core.launch_request import LAUNCH_FIELDS
from xinference.errors import InvalidRequest, UnsupportedOption
from xinference.model.spec import validate_model_name

__all__ = ["AddReplicasRequest", "LaunchModelRequest", "ModelCard", "ModelList"]

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


class LaunchModelRequest(OpenAIRequest):
    """``POST /v1/models``."""

    model_config = ConfigDict(extra="allow", protected_namespaces=())
    log_extra_fields = False  # extra fields are engine launch options, validated by the engine

    model_name: str = Field(min_length=1)
    model_type: str = "LLM"
    model_engine: str | None = None
    model_uid: str | None = None
    model_format: str | None = None
    model_size_in_billions: int | str | float | None = None
    quantization: str | None = None
    replica: int = Field(default=1, ge=1, le=64)
    n_worker: int | None = Field(default=1, ge=1)
    n_gpu: int | str | None = "auto"
    # -- platform launch fields (not engine options)
    ignore_memory_check: bool = Field(default=False, description="launch even if the memory estimate says no")
    # -- where the weights come from: a local path on the worker (overrides the spec), or the hub to download from
    worker_ip: str | None = Field(default=None, max_length=300, description="host or host:port of the worker")
    gpu_idx: int | list[int] | None = None
    model_path: str | None = None
    download_hub: Literal["huggingface", "modelscope"] | None = None
    # -- operations (issue 12): unload when idle, bounded queue, come back after a restart
    keep_alive: str | int | float | None = Field(
        default=None, description="stay loaded this long after the last request: '10m', seconds, -1 forever, 0")
    max_queued: int | None = Field(default=None, ge=0, description="requests that may wait for a slot; then 429")
    queue_timeout: float | None = Field(default=None, gt=0, description="seconds a request may wait for a slot")
    autostart: bool = Field(default=False, description="launch again when the server restarts")

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

    @field_validator("model_uid")
    @classmethod
    def _uid(cls, value: str | None) -> str | None:
        return None if value is None else validate_model_name(value, "model_uid")

    @field_validator("n_gpu")
    @classmethod
    def _n_gpu(cls, value: int | str | None) -> int | str | None:
        if isinstance(value, str) and value != "auto":
            raise ValueError("n_gpu is 'auto', null (CPU only) or a number of GPUs")
        if isinstance(value, int) and value < 0:
            raise ValueError("n_gpu cannot be negative")
        return value

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
        launch = {name: getattr(self, name) for name in LAUNCH_FIELDS}  # the one list: core/launch_request.py
        return {**launch, "engine_kwargs": extra, "worker_ip": self.worker_ip or None}


class AddReplicasRequest(BaseModel):
    """``POST /v1/models/{uid}/replicas`` (the official client's scale-up payload)."""

    model_config = ConfigDict(extra="forbid")

    replica: int = Field(default=1, ge=1, le=64)
    n_gpu: int | str | None = "auto"
    model_engine: str | None = None
    replica_config: dict[str, Any] | list[dict[str, Any]] | None = None

    def worker_ip(self) -> str | None:
        """The worker named by a one-device ``replica_config``, if any; other placement fields are refused."""
        if self.model_engine is not None:
            raise UnsupportedOption("new replicas run the model's own engine", param="model_engine")
        config = self.replica_config
        if config is None:
            return None
        configs = config if isinstance(config, list) else [config]
        devices = [d for c in configs for d in c.get("devices", [])]
        if len(devices) != 1 or set(devices[0]) - {"worker_ip"}:
            raise UnsupportedOption("replica_config may only name one worker_ip", param="replica_config")
        worker: str | None = devices[0].get("worker_ip")
        return worker


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
    model_engine: str
    engine: str | None = None
    status: str
    replica: int


class ModelList(ResponseBody):
    """The body of ``GET /v1/models``."""

    object: Literal["list"]
    data: list[ModelCard]
