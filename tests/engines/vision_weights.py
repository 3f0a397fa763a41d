"""Test weights in the layout mlx-vlm reads: the tiny LLaVA of :mod:`tests.vision_models` renamed as the hub's
LLaVA repositories name their weights.

Transformers 5 saves LLaVA's CLIP tower without the ``vision_model.`` level (``vision_tower.encoder...``); the
repositories on the hub, which users download, have it (``vision_tower.vision_model.encoder...``), and mlx-vlm's
loader only places those.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["hub_layout"]

_TOWER = "vision_tower."
_HUB_TOWER = "vision_tower.vision_model."


def hub_layout(folder: Path) -> Path:
    """``folder``'s weights renamed in place to the hub's LLaVA layout (idempotent); the other files are kept."""
    from safetensors.numpy import load_file, save_file

    path = folder / "model.safetensors"
    weights = load_file(str(path))
    if any(key.startswith(_HUB_TOWER) for key in weights):
        return folder
    renamed = {
        (_HUB_TOWER + key[len(_TOWER) :] if key.startswith(_TOWER) else key): value for key, value in weights.items()
    }
    save_file(renamed, str(path), metadata={"format": "pt"})
    return folder
