"""The exception tree: statuses, types, and pickling across actor calls."""

from __future__ import annotations

import pickle

import pytest

from xinference import errors


@pytest.mark.parametrize(
    "cls,status",
    [
        (errors.InvalidRequest, 400),
        (errors.ContextLengthExceeded, 400),
        (errors.UnsupportedOption, 400),
        (errors.EngineRejected, 400),
        (errors.WrongModelType, 400),
        (errors.RequestTooLarge, 413),
        (errors.AuthenticationFailed, 401),
        (errors.ModelNotFound, 404),
        (errors.ResponseNotFound, 404),
        (errors.ImageNotFound, 404),
        (errors.RequestNotFound, 404),
        (errors.ModelAlreadyExists, 409),
        (errors.McpServerNotFound, 404),
        (errors.McpServerExists, 409),
        (errors.McpError, 502),
        (errors.McpTimeout, 504),
        (errors.RequestAborted, 409),
        (errors.LaunchFailed, 500),
        (errors.EngineError, 500),
        (errors.ModelUnavailable, 503),
    ],
)
def test_status_and_pickle_round_trip(cls: type[errors.XinferenceError], status: int) -> None:
    exc = cls("something went wrong", param="field")
    assert exc.status_code == status
    assert isinstance(exc, errors.XinferenceError)
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls and back.message == "something went wrong" and back.param == "field"
    assert str(back) == "something went wrong"


def test_every_public_class_is_exported() -> None:
    classes = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, errors.XinferenceError)}
    assert classes == set(errors.__all__)
