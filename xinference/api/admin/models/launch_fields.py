"""Pydantic field types of the launch and scaling requests (``POST /v1/models``, ``POST /v1/models/{uid}/replicas``).

Each type accepts exactly the JSON values that mean something for its field and refuses the rest with a message
saying what the field takes, so the API answers a 400 naming the field instead of coercing (``"2"`` or ``true`` as a
number of replicas) or letting a wrong value reach placement (where ``n_gpu: "two"`` was an assertion and
``n_gpu: -3`` sliced the GPU list). The rules themselves live in ``core/launch.py``, shared with the CLI.
Declared types are kept for the OpenAPI document.
"""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal

from pydantic import PlainValidator
from pydantic_core import PydanticCustomError

from xinference.core.launch import check_gpu_idx, check_keep_alive, check_model_size, check_n_gpu

__all__ = ["GpuIdx", "KeepAlive", "ModelSize", "NGpu", "refuse"]


def refuse(message: str) -> PydanticCustomError:
    """A validation error whose message is ``message`` as it is (no "Value error, " prefix)."""
    return PydanticCustomError("invalid_value", message)


def _checked(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def validate(value: Any) -> Any:
        try:
            return check(value)
        except ValueError as exc:
            raise refuse(str(exc)) from None

    return validate


NGpu = Annotated[
    int | Literal["auto"] | None,
    PlainValidator(_checked(check_n_gpu), json_schema_input_type=int | Literal["auto"] | None),
]
GpuIdx = Annotated[
    int | list[int] | None, PlainValidator(_checked(check_gpu_idx), json_schema_input_type=int | list[int] | None)
]
KeepAlive = Annotated[
    str | int | float | None,
    PlainValidator(_checked(check_keep_alive), json_schema_input_type=str | int | float | None),
]
ModelSize = Annotated[
    int | float | str | None,
    PlainValidator(_checked(check_model_size), json_schema_input_type=int | float | str | None),
]
