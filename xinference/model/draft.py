"""Speculative decoding's draft model: chosen at launch, fetched with the weights, checked against its target.

How a draft reaches an engine, in three steps:

1. **Launch (supervisor)**: :func:`plan_draft` takes the launch-level fields ``enable_mtp`` and
   ``draft_model_path`` out of the engine options (they are never engine options, as in the original Xinference).
   ``enable_mtp: true`` looks up the spec's declared :class:`~xinference.model.spec.DraftModel` in the catalog and
   refuses, with a 400 saying why, a spec that declares none, a draft missing from the catalog, one in another
   format, or one not smaller than the target. ``draft_model_path`` (a path on the worker) overrides the catalog's
   draft. The result is a plain dict carried by every replica's launch plan.
2. **Model process**: :func:`attach_draft` resolves the draft's weights like any weights
   (:func:`~xinference.model.download.resolve_model_path`: bundled, local or downloaded into the cache) and turns
   the plan into a :class:`DraftAttachment`, handed to the engine as its ``draft`` option.
3. **Engine**: an engine supports drafts when its config has a ``draft`` field (llama.cpp, vLLM); before loading it
   calls :func:`check_draft_compatible`, which refuses a draft whose vocabulary differs from the target's or which
   is not smaller, then wires it in its own way. Explicit engine speculative options win over a catalog draft.
"""

from __future__ import annotations

import json
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict

from xinference.errors import InvalidRequest, ModelNotFound

if TYPE_CHECKING:
    from xinference.model.registry import ModelRegistry, SpecChoice

__all__ = [
    "DRAFT_LAUNCH_FIELDS",
    "DraftAttachment",
    "attach_draft",
    "check_draft_compatible",
    "engine_takes_draft",
    "plan_draft",
]

#: Launch fields read here and removed from the engine options.
DRAFT_LAUNCH_FIELDS = ("enable_mtp", "draft_model_path")
#: llama.cpp accepts drafts whose vocabulary size differs by at most this many tokens (added special tokens).
VOCAB_SIZE_TOLERANCE = 128


class DraftAttachment(BaseModel):
    """A draft model's local weights as the engine receives them (its ``draft`` option)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    kind: Literal["draft", "mtp"] = "draft"
    #: ``catalog``: attached by ``enable_mtp`` from the spec; ``user``: the launch's ``draft_model_path``
    source: Literal["catalog", "user"] = "user"
    #: what it is, for logs and the resolved config (``smollm2-instruct 0_135 ggufv2 Q4_1``); never a path
    name: str = ""


def engine_takes_draft(config_class: type[BaseModel]) -> bool:
    """Whether an engine can attach a draft model: its config has a ``draft`` option."""
    return "draft" in config_class.model_fields


def _truthy(value: Any, field: str) -> bool:
    if isinstance(value, bool) or value is None:
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on", "false", "0", "no", "off", ""):
        return value.strip().lower() in ("true", "1", "yes", "on")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidRequest(f"{field} must be true or false, got {value!r}", param=field)


def _size(value: int | str) -> float:
    return float(str(value).replace("_", "."))


def plan_draft(
    registry: ModelRegistry,
    choice: SpecChoice,
    engine_name: str,
    config_class: type[BaseModel],
    engine_kwargs: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Split the draft fields off a launch's engine options: ``(engine options left, draft plan or None)``.

    Raises InvalidRequest (400) naming the field when the draft cannot be honoured; nothing is dropped silently.
    """
    if "draft" in engine_kwargs:
        raise InvalidRequest(
            "draft is set by the platform; launch with enable_mtp or draft_model_path instead", param="draft"
        )
    options = {k: v for k, v in engine_kwargs.items() if k not in DRAFT_LAUNCH_FIELDS}
    enabled = _truthy(engine_kwargs.get("enable_mtp"), "enable_mtp")
    path = engine_kwargs.get("draft_model_path") or None
    if not enabled and path is None:
        return options, None
    field = "draft_model_path" if path is not None else "enable_mtp"
    if not engine_takes_draft(config_class):
        raise InvalidRequest(
            f"{engine_name} cannot attach a draft model, so {field} cannot be honoured; launch GGUF weights with "
            "llama.cpp, use the engine's own speculative options, or leave it unset",
            param=field,
        )
    if path is not None:
        if not isinstance(path, str) or "\0" in path or not os.path.isabs(path):
            raise InvalidRequest("draft_model_path must be an absolute path on the worker", param=field)
        return options, {"source": "user", "path": path, "kind": "draft", "model_format": choice.spec.model_format}
    return options, _catalog_draft(registry, choice)


def _catalog_draft(registry: ModelRegistry, choice: SpecChoice) -> dict[str, Any]:
    target, spec = choice.family, choice.spec
    wanted = spec.draft_model
    described = f"{target.model_name} {spec.size} {spec.model_format}"
    if wanted is None:
        raise InvalidRequest(
            f"enable_mtp: {described} declares no draft model; pass draft_model_path to use one of your own",
            param="enable_mtp",
        )
    model_format = wanted.model_format or spec.model_format
    if model_format != spec.model_format:
        raise InvalidRequest(
            f"enable_mtp: the draft of {described} ships as {model_format}, but the target runs as "
            f"{spec.model_format}; one engine must load both",
            param="enable_mtp",
        )
    try:
        family = registry.get(wanted.model_name)
        found = registry.choices(family, model_format, wanted.model_size_in_billions, wanted.quantization)
    except (ModelNotFound, InvalidRequest) as exc:
        raise InvalidRequest(
            f"enable_mtp: the draft model of {described} is not available: {exc.message}", param="enable_mtp"
        ) from None
    draft = found[0]
    if family.model_type != target.model_type:
        raise InvalidRequest(
            f"enable_mtp: the draft {family.model_name} is a {family.model_type} model, not {target.model_type}",
            param="enable_mtp",
        )
    if _size(draft.spec.model_size_in_billions) >= _size(spec.model_size_in_billions):
        raise InvalidRequest(
            f"enable_mtp: the draft {family.model_name} ({draft.spec.size}B) is not smaller than the target "
            f"{target.model_name} ({spec.size}B); drafting only pays with a much smaller model",
            param="enable_mtp",
        )
    return {
        "source": "catalog",
        "kind": wanted.kind,
        "name": f"{family.model_name} {draft.spec.size} {draft.spec.model_format} {draft.quantization}",
        "model_name": family.model_name,
        "spec": draft.spec.model_dump(mode="json"),
        "quantization": draft.quantization,
        "model_format": model_format,
    }


def attach_draft(
    plan: dict[str, Any],
    progress: Callable[[int, int], None] | None = None,
    cancel: threading.Event | None = None,
    download_hub: str | None = None,
) -> DraftAttachment:
    """The draft's local weights (downloaded when needed), in the model process. InvalidRequest for a
    ``draft_model_path`` that is not there; LaunchFailed when the download fails."""
    from xinference.model.download import draft_path_on_worker, resolve_model_path
    from xinference.model.spec import ModelSpec

    if plan.get("source") == "user":
        path = draft_path_on_worker(str(plan["path"]), str(plan.get("model_format") or "ggufv2"))
        return DraftAttachment(path=path, kind="draft", source="user", name=os.path.basename(path))
    spec = ModelSpec.model_validate(plan["spec"])
    path = resolve_model_path(
        spec, plan["quantization"], progress, cancel, download_hub=download_hub, model_name=plan.get("model_name")
    )
    return DraftAttachment(path=path, kind=plan.get("kind", "draft"), source="catalog", name=plan.get("name", ""))


# -- compatibility of the files ---------------------------------------------------------------------------------
def check_draft_compatible(target_path: str, draft: DraftAttachment) -> None:
    """Refuse (InvalidRequest, 400) a draft whose vocabulary differs from the target's, or which is not smaller.

    GGUF files are compared on their tokenizer (model, tokens, BOS/EOS); a ``draft_model_path`` also on its
    parameter count (a catalog draft's size was checked at launch, from the catalog). Model folders are compared on
    ``config.json``'s ``vocab_size`` and the tokenizer's vocabulary.
    """
    if target_path.lower().endswith(".gguf") or draft.path.lower().endswith(".gguf"):
        _check_gguf(target_path, draft)
    elif os.path.isdir(target_path) and os.path.isdir(draft.path):
        _check_folders(target_path, draft)


def _refuse(draft: DraftAttachment, why: str) -> InvalidRequest:
    field = "enable_mtp" if draft.source == "catalog" else "draft_model_path"
    label = draft.name or "the draft model"
    return InvalidRequest(f"{label} cannot draft for this model: {why}", param=field)


def _check_gguf(target_path: str, draft: DraftAttachment) -> None:
    from xinference.model.gguf_info import read_gguf_info

    try:
        target = read_gguf_info(target_path)
    except (OSError, ValueError):
        return  # the engine reports an unreadable target itself
    try:
        mine = read_gguf_info(draft.path)
    except (OSError, ValueError) as exc:
        raise _refuse(draft, f"it is not a readable GGUF file ({exc})") from None
    if mine.tokenizer_model != target.tokenizer_model:
        raise _refuse(
            draft,
            f"its tokenizer is {mine.tokenizer_model or 'unknown'}, the target's is "
            f"{target.tokenizer_model or 'unknown'} (different vocabulary families)",
        )
    if abs(mine.n_vocab - target.n_vocab) > VOCAB_SIZE_TOLERANCE:
        raise _refuse(draft, f"its vocabulary has {mine.n_vocab} tokens, the target's {target.n_vocab}")
    shared = min(mine.n_vocab, target.n_vocab)
    if mine.tokens[:shared] != target.tokens[:shared]:
        first = next(i for i in range(shared) if mine.tokens[i] != target.tokens[i])
        raise _refuse(
            draft,
            f"its vocabulary differs from the target's (token {first} is "
            f"{mine.tokens[first][:20]!r}, not {target.tokens[first][:20]!r})",
        )
    if (mine.bos_token_id, mine.eos_token_id) != (target.bos_token_id, target.eos_token_id):
        raise _refuse(draft, "its BOS/EOS tokens differ from the target's")
    if draft.kind == "draft" and draft.source == "user" and mine.n_params >= target.n_params:
        raise _refuse(
            draft,
            f"it has {mine.n_params / 1e9:.2f}B parameters, not fewer than the target's {target.n_params / 1e9:.2f}B",
        )


def _vocab_of(folder: str) -> tuple[int | None, dict[str, int] | None]:
    size: int | None = None
    vocab: dict[str, int] | None = None
    try:
        with open(os.path.join(folder, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        value = config.get("vocab_size", (config.get("text_config") or {}).get("vocab_size"))
        size = int(value) if isinstance(value, int) else None
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(folder, "tokenizer.json"), encoding="utf-8") as handle:
            model = json.load(handle).get("model") or {}
        vocab = model.get("vocab") if isinstance(model.get("vocab"), dict) else None
    except (OSError, ValueError):
        pass
    return size, vocab


def _check_folders(target_path: str, draft: DraftAttachment) -> None:
    target_size, target_vocab = _vocab_of(target_path)
    size, vocab = _vocab_of(draft.path)
    if target_vocab is not None and vocab is not None and target_vocab != vocab:
        raise _refuse(
            draft,
            f"its tokenizer's vocabulary ({len(vocab)} tokens) differs from the target's ({len(target_vocab)} tokens)",
        )
    if target_size is not None and size is not None and abs(size - target_size) > VOCAB_SIZE_TOLERANCE:
        raise _refuse(draft, f"its vocab_size is {size}, the target's {target_size}")
