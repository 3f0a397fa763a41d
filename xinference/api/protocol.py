"""Shared pieces of the request models. No engine, torch or xoscar imports here."""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["OpenAIRequest", "ResponseBody"]

logger = logging.getLogger("xinference.api.protocol")
#: field names already logged (bounded: clients choose the names, so a client could otherwise grow it forever)
_reported: set[str] = set()
_REPORTED_LIMIT = 1024


class OpenAIRequest(BaseModel):
    """Base of OpenAI-style requests: unknown fields are accepted (clients send many) but logged once each."""

    model_config = ConfigDict(extra="allow")
    #: False where extra fields carry meaning of their own (launch options), so they are not "unsupported".
    log_extra_fields: ClassVar[bool] = True

    @model_validator(mode="after")
    def _log_unknown(self) -> Any:
        if not self.log_extra_fields:
            return self
        for name in self.model_extra or {}:
            key = f"{type(self).__name__}.{name}"
            if key not in _reported and len(_reported) < _REPORTED_LIMIT:
                _reported.add(key)
                logger.info("ignoring unsupported field %r in %s", name, type(self).__name__)
        return self


class ResponseBody(BaseModel):
    """Base of the response models: they describe the bodies in the OpenAPI document (``response_model=``), and
    tests check real answers against them. Routes send the engines' dicts as they are (no validation per request:
    these bodies can be large); fields an engine adds beyond the documented ones are allowed."""

    model_config = ConfigDict(extra="allow")
