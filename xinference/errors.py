"""The one exception tree of the platform.

Every failure a user can cause or meet is one of these classes. Each class carries the HTTP status and the
OpenAI error ``type`` it maps to, so the API turns any of them into a response in one place
(:mod:`xinference.api.errors`), whichever process raised it: they are plain picklable exceptions and cross
xoscar actor calls unchanged.

::

    XinferenceError                      500  internal_error
    ├── InvalidRequest                   400  invalid_request_error
    │   ├── ContextLengthExceeded        400  (code: context_length_exceeded)
    │   ├── UnsupportedOption            400  (code: unsupported_option)
    │   ├── EngineRejected               400  (code: engine_rejected)
    │   ├── WrongModelType               400  (code: wrong_model_type)
    │   └── RequestTooLarge              413  (code: request_too_large)
    ├── AuthenticationFailed             401  authentication_error
    ├── ModelNotFound                    404  not_found_error
    ├── ResponseNotFound                 404  invalid_request_error (code: response_not_found)
    ├── ImageNotFound                    404  not_found_error (code: image_not_found)
    ├── RequestNotFound                  404  not_found_error (code: request_not_found)
    ├── McpServerNotFound                404  not_found_error (code: mcp_server_not_found)
    ├── ModelAlreadyExists               409  conflict_error
    ├── McpServerExists                  409  conflict_error (code: mcp_server_exists)
    ├── RequestAborted                   409  conflict_error (code: request_aborted)
    ├── LaunchFailed                     500  launch_error
    ├── TooManyRequests                  429  rate_limit_error (Retry-After)
    ├── ModelUnavailable                 503  service_unavailable
    │   ├── ReplicaUnreachable           503  (code: replica_unreachable)
    │   ├── RequestInterrupted           503  (code: request_interrupted)
    │   └── ModelLoadTimeout             503  (code: model_loading, Retry-After)
    ├── McpError                         502  mcp_error (code: mcp_error)
    │   └── McpTimeout                   504  (code: mcp_timeout)
    └── EngineError                      500  engine_error

Programming errors are *not* part of this tree: they stay ``RuntimeError``/``TypeError`` and reach the API's
catch-all handler, which logs them and answers a generic 500 without a traceback.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AuthenticationFailed",
    "ContextLengthExceeded",
    "EngineError",
    "EngineRejected",
    "ImageNotFound",
    "InvalidRequest",
    "LaunchFailed",
    "McpError",
    "McpServerExists",
    "McpServerNotFound",
    "McpTimeout",
    "ModelAlreadyExists",
    "ModelLoadTimeout",
    "ModelNotFound",
    "ModelUnavailable",
    "ReplicaUnreachable",
    "RequestAborted",
    "RequestInterrupted",
    "RequestNotFound",
    "RequestTooLarge",
    "ResponseNotFound",
    "TooManyRequests",
    "UnsupportedOption",
    "WrongModelType",
    "XinferenceError",
]


class XinferenceError(Exception):
    """Base of every error the platform raises on purpose.

    ``param`` names the request field at fault, when there is one. Subclasses set ``status_code``, ``error_type``
    and, when useful, ``code`` (OpenAI's machine-readable error code).
    """

    status_code: int = 500
    error_type: str = "internal_error"
    code: str | None = None
    #: seconds a client should wait before retrying (the ``Retry-After`` header), when the error is transient
    retry_after: float | None = None

    def __init__(self, message: str, *, param: str | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if retry_after is not None:
            self.retry_after = retry_after

    def __reduce__(self) -> tuple[Any, ...]:
        # Keep ``param`` and ``retry_after`` when the error is pickled across an actor call.
        return (_rebuild, (type(self), self.message, self.param, self.retry_after))

    def __str__(self) -> str:
        return self.message


def _rebuild(
    cls: type[XinferenceError], message: str, param: str | None, retry_after: float | None = None
) -> XinferenceError:
    return cls(message, param=param, retry_after=retry_after)


class InvalidRequest(XinferenceError):
    """Raised when a request is malformed or asks for something impossible (a client mistake)."""

    status_code = 400
    error_type = "invalid_request_error"


class ContextLengthExceeded(InvalidRequest):
    """Raised when a prompt (plus the requested completion) does not fit the model's context window."""

    code = "context_length_exceeded"


class UnsupportedOption(InvalidRequest):
    """Raised when a request sets an option that this platform accepts in its schema but does not support yet."""

    code = "unsupported_option"


class EngineRejected(InvalidRequest):
    """Raised when the requested engine cannot run the requested model here; the message says why."""

    code = "engine_rejected"


class WrongModelType(InvalidRequest):
    """Raised when a model is used for something it cannot do (chat on an embedding model, ...)."""

    code = "wrong_model_type"


class RequestTooLarge(InvalidRequest):
    """Raised when an upload (an audio file) is larger than the server accepts; the message gives the limit."""

    status_code = 413
    code = "request_too_large"


class AuthenticationFailed(XinferenceError):
    """Raised when API keys are configured and a request carries no key or a wrong one."""

    status_code = 401
    error_type = "authentication_error"
    code = "invalid_api_key"


class ModelNotFound(XinferenceError):
    """Raised when a model uid (or model name in the registry) does not exist."""

    status_code = 404
    error_type = "not_found_error"
    code = "model_not_found"


class ResponseNotFound(XinferenceError):
    """Raised when a stored response (``previous_response_id``, ``GET /v1/responses/{id}``) is unknown: never
    stored (``store: false``), expired, evicted, or kept by an API process that has since restarted."""

    status_code = 404
    error_type = "invalid_request_error"
    code = "response_not_found"


class ImageNotFound(XinferenceError):
    """Raised when a generated image's file (``GET /v1/images/files/{name}``) is unknown: never made here, or
    removed since (the files kept are bounded in count and age)."""

    status_code = 404
    error_type = "not_found_error"
    code = "image_not_found"


class RequestNotFound(XinferenceError):
    """Raised when the progress of a request id is asked for (``GET /v1/requests/{id}/progress``) and no request
    runs, or ran lately, under that id."""

    status_code = 404
    error_type = "not_found_error"
    code = "request_not_found"


class McpServerNotFound(XinferenceError):
    """Raised when a request names an MCP server the platform has not configured (``mcp_servers`` of a chat
    request or a launch, ``DELETE /v1/mcp/servers/{name}``)."""

    status_code = 404
    error_type = "not_found_error"
    code = "mcp_server_not_found"


class McpServerExists(XinferenceError):
    """Raised when ``POST /v1/mcp/servers`` adds a server under a name already in use."""

    status_code = 409
    error_type = "conflict_error"
    code = "mcp_server_exists"


class ModelAlreadyExists(XinferenceError):
    """Raised when a launch asks for a model uid that is already running or launching."""

    status_code = 409
    error_type = "conflict_error"
    code = "model_already_exists"


class RequestAborted(XinferenceError):
    """Raised when a request was aborted on demand (``POST /v1/models/{uid}/requests/{request_id}/abort``), or
    arrived under a request id aborted moments before. 409, as Xinference answers a cancelled request."""

    status_code = 409
    error_type = "conflict_error"
    code = "request_aborted"


class LaunchFailed(XinferenceError):
    """Raised when a model could not be started: the engine's own error text, or the subprocess's exit code and
    last log lines, are in the message."""

    error_type = "launch_error"
    code = "launch_failed"


class ModelUnavailable(XinferenceError):
    """Raised when a model exists but cannot serve right now (still loading, its process died)."""

    status_code = 503
    error_type = "service_unavailable"
    code = "model_unavailable"


class TooManyRequests(XinferenceError):
    """Raised when a model's queue is full (``max_queued``) or a request waited longer than its queue timeout:
    the model keeps serving the requests it admitted; the client retries after ``retry_after`` seconds."""

    status_code = 429
    error_type = "rate_limit_error"
    code = "too_many_requests"
    retry_after: float | None = 1.0


class ModelLoadTimeout(ModelUnavailable):
    """Raised when a request named a model unloaded by keep-alive and its reload did not finish in time; the
    load goes on, and a retry after ``retry_after`` seconds may find it ready."""

    code = "model_loading"
    retry_after: float | None = 5.0


class ReplicaUnreachable(ModelUnavailable):
    """Raised when a replica's process cannot be reached (it or its worker died); another replica may serve."""

    code = "replica_unreachable"


class RequestInterrupted(ModelUnavailable):
    """Raised when the platform itself ended a request it was serving: the model was unloaded, its replica was
    removed or restarted, or its stream went unread. The message says which. A stream already under way gets it as
    its closing error event (never a plain end that passes half an answer off as whole); a whole response gets a
    503. Sending the request again may be served by another replica or by the reloaded model."""

    code = "request_interrupted"


class McpError(XinferenceError):
    """Raised when an MCP server cannot be reached, is not ready, or fails a call at the protocol level (not a tool
    that reported an error: that is the tool's output). Inside a chat's tool loop it becomes the call's error,
    handed to the model; it reaches a client only where no model is involved (listing a server's tools)."""

    status_code = 502
    error_type = "mcp_error"
    code = "mcp_error"


class McpTimeout(McpError):
    """Raised when an MCP server did not answer a call within its timeout."""

    status_code = 504
    code = "mcp_timeout"


class EngineError(XinferenceError):
    """Raised when the engine failed while serving a valid request (not the client's fault)."""

    error_type = "engine_error"
    code = "engine_error"
