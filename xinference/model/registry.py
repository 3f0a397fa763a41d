"""The model catalog: built-in families from ``model/families/*.json``, custom registrations, spec selection.

Used by the supervisor when a launch names a model: it finds the family, then the specs that fit what the user
asked for (format, size, quantization). Errors name what is available, so a typo is a one-step fix.
"""

from __future__ import annotations

import builtins
import difflib
import json
import logging
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Iterable

from pydantic import TypeAdapter, ValidationError

from xinference.errors import InvalidRequest, ModelAlreadyExists, ModelNotFound
from xinference.model.custom import RegistrationStore
from xinference.model.spec import ModelFamily, ModelSpec, format_size

__all__ = ["ModelRegistry", "SpecChoice", "load_builtin_families"]

logger = logging.getLogger(__name__)
_FAMILY_LIST = TypeAdapter(list[ModelFamily])


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


@dataclass(frozen=True)
class SpecChoice:
    """One concrete way to run a family: a spec and one of its quantizations."""

    family: ModelFamily
    spec: ModelSpec
    quantization: str


def load_builtin_families() -> list[ModelFamily]:
    """Read and validate every JSON file in ``model/families``; a bad file fails loudly with its name."""
    families: list[ModelFamily] = []
    folder = resources.files("xinference.model") / "families"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".json"):
            continue
        try:
            families.extend(_FAMILY_LIST.validate_python(json.loads(entry.read_text(encoding="utf-8"))))
        except (ValidationError, ValueError) as exc:
            raise RuntimeError(f"built-in model catalog file {entry.name} is invalid: {exc}") from exc
    return families


class ModelRegistry:
    """Names → families, with the built-in catalog loaded once."""

    def __init__(self, families: Iterable[ModelFamily] | None = None, store: RegistrationStore | None = None) -> None:
        self._lock = threading.Lock()
        self._families: dict[str, ModelFamily] = {}
        for family in families if families is not None else load_builtin_families():
            if family.model_name in self._families:
                raise RuntimeError(f"model {family.model_name!r} is defined twice in the catalog")
            self._families[family.model_name] = family
        self._builtin = frozenset(self._families)
        self._store = store
        self._persisted: set[str] = set()
        for family in store.load() if store is not None else ():
            if family.model_name in self._families:
                logger.warning("ignoring the registration %r: a built-in model has that name", family.model_name)
                continue
            self._families[family.model_name] = family
            self._persisted.add(family.model_name)

    def is_builtin(self, model_name: str) -> bool:
        return model_name in self._builtin

    def register(self, family: ModelFamily, persist: bool) -> None:
        """Add a custom family; it cannot take the name of a built-in or of another registration."""
        with self._lock:
            if family.model_name in self._builtin:
                raise InvalidRequest(
                    f"{family.model_name!r} is a built-in model; register yours under another name", param="model_name"
                )
            if family.model_name in self._families:
                raise ModelAlreadyExists(
                    f"a model named {family.model_name!r} is already registered; unregister it first",
                    param="model_name",
                )
            if persist and self._store is not None:
                self._store.save(family)
                self._persisted.add(family.model_name)
            self._families[family.model_name] = family

    def unregister(self, model_name: str, model_type: str) -> None:
        if model_name in self._builtin:
            raise InvalidRequest(f"{model_name!r} is a built-in model and cannot be unregistered", param="model_name")
        family = self.get(model_name, model_type)
        with self._lock:
            self._families.pop(model_name, None)
            if model_name in self._persisted and self._store is not None:
                self._store.delete(family.model_type, model_name)
                self._persisted.discard(model_name)

    def get(self, model_name: str, model_type: str | None = None) -> ModelFamily:
        """The family called ``model_name``; ModelNotFound (with close matches) when there is none."""
        family = self._families.get(model_name)
        if family is not None and model_type is not None and family.model_type.lower() != model_type.lower():
            # the type defaults to LLM (as in Xinference): "did you mean <the same name>" would not say what is wrong
            raise ModelNotFound(
                f"{model_name!r} is {_article(family.model_type)} {family.model_type} model, not {model_type}: give "
                f"its type (model_type {family.model_type!r}, or --model-type {family.model_type} on the command line)",
                param="model_type",
            )
        if family is None:
            close = difflib.get_close_matches(model_name, list(self._families), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            kind = f"{model_type} model" if model_type else "model"
            raise ModelNotFound(f"{kind} {model_name!r} is not in the catalog{hint}", param="model_name")
        return family

    def list(self, model_type: str | None = None) -> list[ModelFamily]:
        with self._lock:
            values = list(self._families.values())
        return [f for f in values if model_type is None or f.model_type.lower() == model_type.lower()]

    @staticmethod
    def choices(
        family: ModelFamily,
        model_format: str | None = None,
        model_size_in_billions: int | str | float | None = None,
        quantization: str | None = None,
    ) -> builtins.list[SpecChoice]:
        """Every (spec, quantization) of ``family`` that fits the filters, in catalog order.

        Raises InvalidRequest naming what the family offers when nothing fits.
        """
        size = format_size(model_size_in_billions) if model_size_in_billions is not None else None
        found: list[SpecChoice] = []
        for spec in family.model_specs:
            if model_format is not None and spec.model_format != model_format:
                continue
            if size is not None and spec.size != size:
                continue
            for quant in spec.quantizations:
                if quantization is None or quant.lower() == quantization.lower():
                    found.append(SpecChoice(family, spec, quant))
        if not found:
            offered = "; ".join(
                f"format {s.model_format}, size {s.size}, quantizations {', '.join(s.quantizations)}"
                for s in family.model_specs
            )
            asked = ", ".join(
                f"{k}={v}"
                for k, v in (("model_format", model_format), ("size", size), ("quantization", quantization))
                if v is not None
            )
            raise InvalidRequest(
                f"model {family.model_name!r} has no spec with {asked}; it ships as: {offered}",
                param="model_format" if model_format else "quantization",
            )
        return found
