"""The hubs weights can be downloaded from, by name: the one place a new hub is added."""

from __future__ import annotations

from collections.abc import Callable

from xinference.errors import LaunchFailed
from xinference.model.hub.base import Hub
from xinference.model.hub.huggingface import HuggingFaceHub
from xinference.model.hub.modelscope import ModelScopeHub

__all__ = ["HUBS", "HUB_FACTORIES", "get_hub"]

#: Hub name -> adapter factory. The order is the fallback order when a spec names several hubs.
HUB_FACTORIES: dict[str, Callable[[], Hub]] = {
    "huggingface": HuggingFaceHub,
    "modelscope": ModelScopeHub,
}
HUBS: tuple[str, ...] = tuple(HUB_FACTORIES)


def get_hub(name: str) -> Hub:
    """The adapter of hub ``name``; LaunchFailed naming the known hubs for any other name."""
    factory = HUB_FACTORIES.get(name)
    if factory is None:
        raise LaunchFailed(f"unknown download hub {name!r}; use one of {', '.join(HUBS)}")
    return factory()
