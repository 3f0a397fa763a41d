"""Launch options of the MLX engine and their translation into ``mlx_lm.server`` arguments.

Users pass them as extra launch kwargs; unknown names are a 400.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from xinference.engines.cli_args import option_args

__all__ = ["MLXConfig"]


class MLXConfig(BaseModel):
    """What a user may set at launch; ``None`` leaves mlx-lm's own default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int | None = Field(default=None, ge=1, description="default completion length")
    draft_model: str | None = Field(default=None, description="path of a small draft model (speculative decoding)")
    num_draft_tokens: int | None = Field(default=None, ge=1)
    trust_remote_code: bool = False
    chat_template: str | None = None
    use_default_chat_template: bool = False

    def to_cli_args(self, *, model_path: str, host: str, port: int) -> list[str]:
        """The ``python -m mlx_lm.server`` command line (after the module name) for these options."""
        args = ["--model", model_path, "--host", host, "--port", str(port)]
        return args + option_args(
            self,
            valued=("max_tokens", "draft_model", "num_draft_tokens", "chat_template"),
            switches=("trust_remote_code", "use_default_chat_template"),
        )
