"""Response shape of ``GET /v1/engines/{model_name}`` and ``GET /v1/engines/{model_type}/{model_name}``.

Xinference's shape, so its client's ``query_engine_by_model_name`` reads it: engine name → the params it accepts
(one entry per format and size, with the quantizations) or, when it cannot run the model anywhere in the cluster,
the sentence saying why.
"""

from __future__ import annotations

from typing import Any, Union

__all__ = ["EngineParams", "EngineTable"]

#: One accepted spec: ``model_name``, ``model_format``, ``model_size_in_billions``, ``quantizations``,
#: ``model_hub``.
EngineParams = dict[str, Any]
EngineTable = dict[str, Union[list[EngineParams], str]]
