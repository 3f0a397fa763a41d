"""Check vision chat on vLLM for real, with a real vision-language model on an NVIDIA GPU, and print a table.

The weights must already be on the machine's disk (a GPU machine lent to this project cannot reach a model hub):
by default the Hugging Face repository ``Qwen/Qwen2.5-VL-3B-Instruct`` (catalog family ``qwen2.5-vl-instruct``,
size 3, ~7.5 GB of safetensors with its ``preprocessor_config.json``, tokenizer and chat template) downloaded as
it is into ``/models/Qwen2.5-VL-3B-Instruct``, or any folder given with ``--model-path``. Get it, where a hub is
reachable, with ``huggingface-cli download Qwen/Qwen2.5-VL-3B-Instruct --local-dir /models/Qwen2.5-VL-3B-Instruct``.
Another VL family of the catalog works the same (``--model-name``, ``--size``, ``--model-path``).

What it does:

1. installs vLLM's environment with the project's own command (``xinference engine install vLLM --local``),
   unless ``--skip-install``; vLLM's CUDA build brings the torchvision its Qwen-VL processors need;
2. starts one ``xinference-local`` in a temporary home and launches the model on vLLM from the local folder, with
   ``limit_mm_per_prompt`` ``{"image": 2}`` and ``mm_processor_kwargs`` bounding the pixels of an image;
3. draws two pictures here (a red square and a blue circle on white, PNG ``data:`` URIs) and asks for the
   colour of the shape in each: the answers must name red and blue; ``usage.prompt_tokens`` of a request with an
   image must exceed the same text alone by the image's tokens (more than 4); two images in one request; a stream
   with an image and usage; three images (over the launch's limit) must be a 400 in the API's error shape; then
   the model is terminated and its GPU memory given back.

Usage (from the repository root, with the project installed in the current Python)::

    python scripts/gpu_vision_check.py
    python scripts/gpu_vision_check.py --model-path /data/Qwen2.5-VL-7B-Instruct --size 7 --skip-install

Exit code 0 when every check passed, 1 when one failed, 2 when the GPU or the weights are missing.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_engines_check import Check, Platform, gpu_memory_used_mib, install, post, run_check  # noqa: E402

DEFAULT_PATH = "/models/Qwen2.5-VL-3B-Instruct"
ENGINE = "vLLM"
UID = "check-vision"
ASK = "What colour is the shape in this picture? Answer with one word."
#: Qwen2.5-VL's processor: at most this many pixels per image (~1280 image tokens of 28x28 pixels)
MAX_PIXELS = 1280 * 28 * 28


def picture(shape: str, colour: tuple[int, int, int]) -> str:
    """A 448x448 PNG of one coloured shape on white, as a ``data:`` URI."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (448, 448), (255, 255, 255))
    draw = ImageDraw.Draw(image)
    box = (96, 96, 352, 352)
    if shape == "circle":
        draw.ellipse(box, fill=colour)
    else:
        draw.rectangle(box, fill=colour)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


RED_SQUARE = picture("square", (220, 20, 20))
BLUE_CIRCLE = picture("circle", (20, 40, 220))


def with_images(*urls: str, text: str = ASK) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


def check_vision(platform: Platform, launch: dict[str, Any], results: list[Check]) -> None:
    api = platform.api
    chat_url = f"{api}/chat/completions"
    before = gpu_memory_used_mib()

    def ask(messages: list[dict[str, Any]], **params: Any) -> dict[str, Any]:
        return post(chat_url, {"model": UID, "messages": messages, "temperature": 0, "max_tokens": 16, **params})

    def do_launch() -> str:
        post(f"{api}/models", {**launch, "model_engine": ENGINE, "model_uid": UID})
        return f"GPU memory {sum(before)} -> {sum(gpu_memory_used_mib())} MiB"

    if not run_check(results, ENGINE, "launch", do_launch):
        return

    def colours() -> str:
        seen = []
        for url, colour in ((RED_SQUARE, "red"), (BLUE_CIRCLE, "blue")):
            text = ask(with_images(url))["choices"][0]["message"]["content"]
            if colour not in text.lower():
                raise AssertionError(f"expected {colour!r}, the model said {text!r}")
            seen.append(text.strip())
        return " / ".join(seen)

    def image_tokens() -> str:
        alone = ask([{"role": "user", "content": ASK}])["usage"]["prompt_tokens"]
        one = ask(with_images(RED_SQUARE))["usage"]["prompt_tokens"]
        two = ask(with_images(RED_SQUARE, BLUE_CIRCLE))["usage"]["prompt_tokens"]
        if not one - alone > 4 or not two - one > 4:
            raise AssertionError(f"prompt tokens: text {alone}, one image {one}, two images {two}")
        return f"prompt tokens: text {alone}, +1 image {one}, +2 images {two}"

    def stream() -> str:
        body = {
            "model": UID,
            "messages": with_images(BLUE_CIRCLE),
            "temperature": 0,
            "max_tokens": 16,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        text, usage, first = "", None, None
        started = time.monotonic()
        with httpx.stream("POST", chat_url, json=body, timeout=300) as response:
            if response.status_code != 200:
                raise RuntimeError(f"HTTP {response.status_code}: {response.read()[:300]!r}")
            for line in response.iter_lines():
                if not line.startswith("data:") or line.endswith("[DONE]"):
                    continue
                chunk = json.loads(line[5:])
                if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                    first = first or time.monotonic() - started
                    text += chunk["choices"][0]["delta"]["content"]
                usage = chunk.get("usage") or usage
        if "blue" not in text.lower() or not usage:
            raise AssertionError(f"text {text!r}, usage {usage}")
        return f"TTFT {(first or 0) * 1000:.0f} ms with the image, {usage['prompt_tokens']} prompt tokens"

    def over_the_limit() -> str:
        reply = httpx.post(
            chat_url,
            json={"model": UID, "messages": with_images(RED_SQUARE, BLUE_CIRCLE, RED_SQUARE), "max_tokens": 4},
            timeout=300,
        )
        error = reply.json().get("error") or {}
        if reply.status_code != 400 or not error.get("message"):
            raise AssertionError(f"HTTP {reply.status_code}: {reply.text[:300]}")
        return f"400: {error['message'][:70]}"

    def terminate() -> str:
        reply = httpx.delete(f"{api}/models/{UID}", timeout=300)
        if reply.status_code != 200:
            raise RuntimeError(reply.text[:300])
        time.sleep(3)
        after = gpu_memory_used_mib()
        if sum(after) > sum(before) + 1024:
            raise AssertionError(f"GPU memory not given back: {sum(before)} -> {sum(after)} MiB")
        return f"GPU memory {sum(after)} MiB (was {sum(before)} before launch)"

    for name, body in (
        ("colours of two images", colours),
        ("image tokens counted", image_tokens),
        ("stream with an image", stream),
        ("over limit_mm_per_prompt", over_the_limit),
    ):
        run_check(results, ENGINE, name, body)
    run_check(results, ENGINE, "terminate", terminate)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-name", default="qwen2.5-vl-instruct", help="a catalog VL family")
    parser.add_argument("--size", default="3", help="its size in billions (catalog spelling)")
    parser.add_argument("--model-path", default=DEFAULT_PATH, help="the local Hugging Face folder of its weights")
    parser.add_argument("--skip-install", action="store_true", help="use vLLM's env as it is")
    parser.add_argument("--max-model-len", type=int, default=8192)
    args = parser.parse_args()
    if shutil.which("nvidia-smi") is None:
        print("this check needs an NVIDIA GPU (nvidia-smi not found)")
        return 2
    folder = Path(args.model_path)
    if not (folder / "config.json").is_file() or not any(folder.glob("*.safetensors")):
        print(
            f"no weights at {folder}: put the Hugging Face repository Qwen/Qwen2.5-VL-3B-Instruct there (config.json, "
            "*.safetensors, preprocessor_config.json, tokenizer files), or give another VL model's folder with "
            "--model-path (and its --model-name / --size)"
        )
        return 2
    launch: dict[str, Any] = {
        "model_name": args.model_name,
        "model_format": "pytorch",
        "model_size_in_billions": args.size,
        "quantization": "none",
        "model_path": str(folder),
        "max_model_len": args.max_model_len,
        "limit_mm_per_prompt": {"image": 2},
        "mm_processor_kwargs": {"max_pixels": MAX_PIXELS},
    }
    results: list[Check] = []
    if not args.skip_install and not run_check(results, ENGINE, "install", lambda: install(ENGINE)):
        return 1
    home = Path(tempfile.mkdtemp(prefix="xinference-gpu-vision-"))
    platform = Platform(home)
    try:
        check_vision(platform, launch, results)
    finally:
        platform.stop()
    print()
    print(f"{'check':26} {'result':6} {'seconds':>8}  detail")
    for r in results:
        print(f"{r.name:26} {'ok' if r.ok else 'FAIL':6} {r.seconds:8.1f}  {r.detail[:90]}")
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed; server log: {home / 'server.out'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
