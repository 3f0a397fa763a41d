"""Issue 13, item 9: a TypeError raised inside the llama.cpp adapter is our bug, not the client's 400."""

from __future__ import annotations

import pytest

from xinference.engines.llama_cpp.engine import _backend_errors
from xinference.errors import EngineError, InvalidRequest


def test_type_error_is_an_engine_error_and_value_error_stays_a_400() -> None:
    with pytest.raises(EngineError) as raised:
        with _backend_errors():
            raise TypeError("'NoneType' object is not subscriptable")
    assert not isinstance(raised.value, InvalidRequest)
    with pytest.raises(InvalidRequest, match="rejected"):
        with _backend_errors():
            raise ValueError("n_probs must be positive")
