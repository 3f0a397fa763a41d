"""Calls behind Xinference's model handles (``client.get_model(uid)``): chat and generate, embeddings, rerank and
audio, each taking the model uid first."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from xinference.client.calls.base import Call, Message, as_dict, as_list, present, quoted, unchanged


# -- model handles (Xinference's ``client.get_model(uid)``): the model uid comes first ---------------------------------
def handle_generate(
    model_uid: str, /, prompt: str, generate_config: Mapping[str, Any] | None = None
) -> Call[dict[str, Any]]:
    """A completion of ``prompt``; ``generate_config`` holds the sampling fields, ``stream`` included."""
    config = dict(generate_config or {})
    body = {**config, "model": model_uid, "prompt": prompt}
    return Call("POST", "/v1/completions", as_dict, json=body, stream=bool(config.get("stream")))


def legacy_messages(
    prompt: Any, system_prompt: str | None, chat_history: Sequence[Message] | None
) -> list[dict[str, Any]]:
    """The messages of Xinference's pre-1.0 ``chat(prompt, system_prompt, chat_history)``: the history (its
    leading system message replaced by ``system_prompt``, or one put first), then ``prompt`` as the user's turn.
    The caller's history is not changed."""
    history = [dict(m) for m in chat_history or []]
    if system_prompt is not None:
        if history and history[0].get("role") == "system":
            history[0]["content"] = system_prompt
        else:
            history.insert(0, {"role": "system", "content": system_prompt})
    history.append({"role": "user", "content": prompt})
    return history


def xinference_chunk(chunk: dict[str, Any]) -> dict[str, Any]:
    """A chat chunk as Xinference's server sends it: every delta's ``content`` a string (``""`` where an engine
    sent ``null`` or nothing, as in a role-only first chunk or a closing one). Code written for Xinference
    concatenates ``delta.get("content", "")`` (LlamaIndex does), which a ``null`` would break."""
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta")
        if isinstance(delta, dict) and delta.get("content") is None:
            delta["content"] = ""
    return chunk


def handle_chat(
    model_uid: str,
    /,
    messages: Sequence[Message] | str | None = None,
    tools: list[dict[str, Any]] | None = None,
    enable_thinking: bool | None = None,
    generate_config: Mapping[str, Any] | None = None,
    *,
    prompt: Any = None,
    system_prompt: str | None = None,
    chat_history: Sequence[Message] | None = None,
) -> Call[dict[str, Any]]:
    """A chat completion of ``messages`` (a stream of chunks when ``generate_config["stream"]``).

    Also takes Xinference's pre-1.0 form that LlamaIndex and older scripts use: ``chat(prompt=...,
    system_prompt=..., chat_history=[...], generate_config=...)`` (or a string as the first argument).
    ``enable_thinking`` switches a hybrid reasoning model's thinking for this request.
    """
    legacy = prompt is not None or system_prompt is not None or chat_history is not None
    if isinstance(messages, str):
        if prompt is not None:
            raise ValueError("give the prompt once: as the first argument or as prompt=")
        prompt, messages, legacy = messages, None, True
    if legacy:
        if messages is not None:
            raise ValueError("give messages, or prompt with system_prompt and chat_history, not both")
        if prompt is None:
            raise ValueError("prompt is required with system_prompt or chat_history")
        conversation = legacy_messages(prompt, system_prompt, chat_history)
    elif messages is None:
        raise ValueError("messages is required")
    else:
        conversation = [dict(m) for m in messages]
    config = dict(generate_config or {})
    if enable_thinking is not None:
        template_kwargs = config.get("chat_template_kwargs") or {}
        if isinstance(template_kwargs, str):
            template_kwargs = json.loads(template_kwargs)
        config["chat_template_kwargs"] = {
            **template_kwargs,
            "enable_thinking": enable_thinking,
            "thinking": enable_thinking,
        }
    body: dict[str, Any] = {**config, "model": model_uid, "messages": conversation}
    if tools is not None:
        body["tools"] = tools
    stream = bool(config.get("stream"))
    return Call("POST", "/v1/chat/completions", as_dict, json=body, stream=stream, each=xinference_chunk)


def handle_create_embedding(model_uid: str, /, input: Any, **kwargs: Any) -> Call[dict[str, Any]]:
    """Embeddings of ``input`` (a text, texts, or token ids), OpenAI's shape."""
    return Call("POST", "/v1/embeddings", as_dict, json={**kwargs, "model": model_uid, "input": input})


def handle_rerank(
    model_uid: str,
    /,
    documents: list[str],
    query: str,
    top_n: int | None = None,
    max_chunks_per_doc: int | None = None,
    return_documents: bool | None = None,
    return_len: bool | None = None,
    **kwargs: Any,
) -> Call[dict[str, Any]]:
    """``documents`` ordered by relevance to ``query``: ``{"id", "results": [{"index", "relevance_score",
    "document"}], "meta"}``."""
    body = {
        **kwargs,
        "model": model_uid,
        "documents": documents,
        "query": query,
        **present(
            top_n=top_n,
            max_chunks_per_doc=max_chunks_per_doc,
            return_documents=return_documents,
            return_len=return_len,
        ),
    }
    return Call("POST", "/v1/rerank", as_dict, json=body)


_TEXT_TRANSCRIPTS = ("text", "srt", "vtt")


def _transcript_call(
    path: str,
    model_uid: str,
    audio: bytes,
    language: str | None,
    prompt: str | None,
    response_format: str | None,
    temperature: float | None,
    timestamp_granularities: list[str] | None,
    kwargs: Mapping[str, Any],
) -> Call[Any]:
    form: dict[str, Any] = {
        **{k: str(v) for k, v in kwargs.items()},
        "model": model_uid,
        **present(language=language, prompt=prompt, response_format=response_format, temperature=temperature),
    }
    if timestamp_granularities:
        form["timestamp_granularities[]"] = list(timestamp_granularities)
    as_text = response_format in _TEXT_TRANSCRIPTS
    return Call(
        "POST",
        path,
        unchanged if as_text else as_dict,
        data=form,
        files=[("file", ("file", audio, "application/octet-stream"))],
        text=as_text,
        unbounded_read=True,
    )


def handle_transcriptions(
    model_uid: str,
    /,
    audio: bytes,
    language: str | None = None,
    prompt: str | None = None,
    response_format: str | None = "json",
    temperature: float | None = 0,
    timestamp_granularities: list[str] | None = None,
    **kwargs: Any,
) -> Call[Any]:
    """The words spoken in ``audio`` (the bytes of a wav, mp3, m4a, ogg, webm or flac file): ``{"text"}`` for
    ``json``, with segments (and words, asked with ``timestamp_granularities=["word"]``) for ``verbose_json``, a
    string for ``text``, ``srt`` and ``vtt``."""
    return _transcript_call(
        "/v1/audio/transcriptions",
        model_uid,
        audio,
        language,
        prompt,
        response_format,
        temperature,
        timestamp_granularities,
        kwargs,
    )


def handle_translations(
    model_uid: str,
    /,
    audio: bytes,
    language: str | None = None,
    prompt: str | None = None,
    response_format: str | None = "json",
    temperature: float | None = 0,
    timestamp_granularities: list[str] | None = None,
    **kwargs: Any,
) -> Call[Any]:
    """``audio`` translated into English text (a multilingual speech-to-text model); answers as
    :func:`handle_transcriptions`."""
    return _transcript_call(
        "/v1/audio/translations",
        model_uid,
        audio,
        language,
        prompt,
        response_format,
        temperature,
        timestamp_granularities,
        kwargs,
    )


def handle_speech(
    model_uid: str,
    /,
    input: str,
    voice: str = "",
    response_format: str = "mp3",
    speed: float = 1.0,
    stream: bool = False,
    **kwargs: Any,
) -> Call[bytes]:
    """``input`` spoken by the model: the audio file's bytes in ``response_format`` (mp3, opus, aac, flac, wav,
    pcm), or with ``stream=True`` an iterator of byte chunks, each sent as soon as a sentence is encoded. An empty
    ``voice`` is the model's default voice."""
    body = {**kwargs, "model": model_uid, "input": input, "response_format": response_format, "speed": speed}
    if voice:
        body["voice"] = voice
    return Call("POST", "/v1/audio/speech", unchanged, json=body, stream=stream, binary=True, unbounded_read=True)


def handle_voices(model_uid: str, /) -> Call[list[dict[str, Any]]]:
    """The voices a text-to-speech model offers, its default first."""
    return Call("GET", f"/v1/models/{quoted(model_uid)}/voices", lambda body: as_list(as_dict(body).get("data", body)))


def handle_kind(description: Mapping[str, Any]) -> str:
    """Which handle serves a model described by ``describe_model``: ``chat``, ``generate``, ``embedding``,
    ``rerank``, ``audio`` or ``image`` (ValueError for a type this platform does not serve, as Xinference's client
    raises)."""
    model_type = description.get("model_type")
    abilities = description.get("model_ability") or []
    if model_type == "LLM":
        if "chat" in abilities:
            return "chat"
        if "generate" in abilities:
            return "generate"
        raise ValueError(f"Unrecognized model ability: {abilities}")
    if model_type in ("embedding", "rerank", "audio", "image"):
        return str(model_type)
    raise ValueError(f"Unknown model type: {model_type}")
