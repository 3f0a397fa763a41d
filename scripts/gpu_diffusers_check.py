"""Check a real Stable Diffusion model on the diffusers engine on a machine with an NVIDIA GPU, and print a table.

The machine cannot be assumed to reach a model hub, so the weights must already be on its disk: a diffusers folder
(what ``save_pretrained`` writes, or a snapshot of the repository: ``model_index.json`` plus ``unet/``, ``vae/``,
``text_encoder/``, ``tokenizer/``, ``scheduler/`` with their configs and ``*.safetensors``). Any of these works:

- ``stabilityai/sd-turbo`` (~5 GB; one step; pass ``--steps 1 --guidance 0``)
- ``stable-diffusion-v1-5/stable-diffusion-v1-5`` (the folders above, ~5 GB in float32 safetensors; the
  ``v1-5-pruned*.safetensors`` single files at the top are not needed)
- ``stabilityai/stable-diffusion-xl-base-1.0`` (also ``text_encoder_2/``, ``tokenizer_2/``)

What it does: starts one ``xinference-local`` (a temporary ``XINFERENCE_HOME``), registers the folder as a custom
image model and launches it on diffusers (float16 on CUDA), then checks through the HTTP API: text to image at
512x512 with ``n=2`` (sizes decoded with Pillow, time per image), the same seed gives the same bytes, a ``url``
answer is served, an image-to-image edit keeps the input's size, the progress of a long request rises and an abort
stops it (409) within a few steps, the model serves on, and terminating it gives the GPU memory back.

Usage (from the repository root, with ``xinference[image]`` installed in the current Python)::

    python scripts/gpu_diffusers_check.py --model-path /models/sd-turbo --steps 1 --guidance 0
    python scripts/gpu_diffusers_check.py --model-path /models/stable-diffusion-v1-5

Exit code 0 when every check passed, 2 when the weights are not on disk (it says what to put there).
``--allow-cpu`` runs it without a GPU (float32), to check the script itself on a small folder.
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

NAME = "gpu-check-sd"
NEEDED = ("model_index.json", "unet", "vae", "scheduler")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _missing(path: Path) -> list[str]:
    return [name for name in NEEDED if not (path / name).exists()]


def _size(data: bytes) -> tuple[int, int]:
    from PIL import Image

    width, height = Image.open(io.BytesIO(data)).size
    return int(width), int(height)


def _gpu_used_mib() -> int | None:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sum(int(line) for line in out.split() if line.strip().isdigit())


class Check:
    def __init__(self) -> None:
        self.rows: list[tuple[str, bool, str]] = []

    def run(self, name: str, step: Callable[[], str]) -> None:
        started = time.monotonic()
        try:
            detail = step()
            ok = True
        except Exception as exc:  # noqa: BLE001 - every failure is one row of the report
            detail, ok = f"{type(exc).__name__}: {exc}", False
        self.rows.append((name, ok, f"{detail} ({time.monotonic() - started:.1f}s)"))
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}", flush=True)

    def report(self) -> int:
        width = max(len(name) for name, _, _ in self.rows)
        print("\n" + "\n".join(f"{name:<{width}}  {'ok ' if ok else 'BAD'}  {d}" for name, ok, d in self.rows))
        return 0 if all(ok for _, ok, _ in self.rows) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-path", type=Path, required=True, help="a diffusers folder on this machine")
    parser.add_argument("--steps", type=int, default=20, help="denoising steps per image")
    parser.add_argument("--guidance", type=float, default=None, help="guidance scale (0 for the turbo models)")
    parser.add_argument("--size", default="512x512")
    parser.add_argument("--allow-cpu", action="store_true", help="run without a GPU (float32), to test the script")
    args = parser.parse_args()

    path = args.model_path.resolve()
    missing = _missing(path) if path.is_dir() else list(NEEDED)
    if missing:
        print(
            f"{path} is not a diffusers folder (missing: {', '.join(missing)}). Put the weights on this disk first, "
            "e.g. a snapshot of stabilityai/sd-turbo or stable-diffusion-v1-5/stable-diffusion-v1-5 (see this "
            "script's docstring); this machine cannot download them.",
            file=sys.stderr,
        )
        return 2
    gpu = shutil.which("nvidia-smi") is not None and _gpu_used_mib() is not None
    if not gpu and not args.allow_cpu:
        print("no NVIDIA GPU here (nvidia-smi); pass --allow-cpu to test the script on a CPU", file=sys.stderr)
        return 2

    home = Path(tempfile.mkdtemp(prefix="xinference-gpu-diffusers-"))
    port = _free_port()
    api = f"http://127.0.0.1:{port}/v1"
    log = (home / "server.out").open("wb")
    env = {**os.environ, "XINFERENCE_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "xinference.deploy.local", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    check = Check()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{api}/cluster/auth", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        family = {
            "model_name": NAME,
            "model_type": "image",
            "model_ability": ["text2image", "image2image"],
            "model_specs": [
                {
                    "model_format": "diffusers",
                    "model_size_in_billions": 1,
                    "quantizations": ["none"],
                    "model_uri": f"file://{path}",
                }
            ],
        }
        launch: dict[str, Any] = {"model_name": NAME, "model_type": "image", "num_inference_steps": args.steps}
        if args.guidance is not None:
            launch["guidance_scale"] = args.guidance
        if gpu:
            launch["torch_dtype"] = "float16"
        before = _gpu_used_mib()

        def register_and_launch() -> str:
            response = httpx.post(f"{api}/model_registrations/image", json={"model": family}, timeout=60)
            response.raise_for_status()
            response = httpx.post(f"{api}/models", json=launch, timeout=900)
            if response.status_code != 200:
                raise RuntimeError(response.text)
            return f"engine {response.json()['model_engine']}, GPU memory {before} -> {_gpu_used_mib()} MiB"

        check.run("launch", register_and_launch)
        width, height = (int(v) for v in args.size.lower().split("x"))

        def generate(**extra: Any) -> dict[str, Any]:
            body = {"model": NAME, "prompt": "a lighthouse on a cliff at dusk, oil painting", "size": args.size}
            response = httpx.post(f"{api}/images/generations", json={**body, **extra}, timeout=900)
            if response.status_code != 200:
                raise RuntimeError(response.text)
            answer: dict[str, Any] = response.json()
            return answer

        def sizes_and_speed() -> str:
            started = time.monotonic()
            answer = generate(n=2, response_format="b64_json", seed=1)
            took = time.monotonic() - started
            got = [_size(base64.b64decode(item["b64_json"])) for item in answer["data"]]
            assert got == [(width, height)] * 2, got
            return f"2 images {args.size} in {took:.1f}s ({args.steps} steps)"

        def same_seed() -> str:
            first = generate(response_format="b64_json", seed=7)["data"][0]["b64_json"]
            again = generate(response_format="b64_json", seed=7)["data"][0]["b64_json"]
            other = generate(response_format="b64_json", seed=8)["data"][0]["b64_json"]
            assert first == again and first != other, "seeds do not repeat"
            return "seed 7 twice: same bytes; seed 8 differs"

        def url_answer() -> str:
            url = generate(response_format="url")["data"][0]["url"]
            fetched = httpx.get(url, timeout=60)
            assert fetched.status_code == 200 and _size(fetched.content) == (width, height)
            return str(url).rsplit("/", 1)[-1]

        def edit() -> str:
            from PIL import Image

            source = io.BytesIO()
            Image.new("RGB", (width, height - 64), (40, 90, 200)).save(source, format="PNG")
            files = {"image": ("in.png", source.getvalue(), "image/png")}
            data = {"model": NAME, "prompt": "a sunset", "response_format": "b64_json", "strength": "0.7"}
            response = httpx.post(f"{api}/images/edits", data=data, files=files, timeout=900)
            if response.status_code != 200:
                raise RuntimeError(response.text)
            got = _size(base64.b64decode(response.json()["data"][0]["b64_json"]))
            assert got == (width, height - 64), got
            return f"edited {got[0]}x{got[1]}"

        def progress_and_abort() -> str:
            answers: list[httpx.Response] = []
            body = {"model": NAME, "prompt": "a long one", "size": args.size, "num_inference_steps": 200}
            body["request_id"] = "gpu-abort"
            worker = threading.Thread(
                target=lambda: answers.append(httpx.post(f"{api}/images/generations", json=body, timeout=900))
            )
            worker.start()
            seen = 0.0
            deadline = time.monotonic() + 300
            while seen <= 0.05 and time.monotonic() < deadline:
                response = httpx.get(f"{api}/requests/gpu-abort/progress", timeout=30)
                if response.status_code == 200:
                    seen = response.json()["progress"]
                time.sleep(0.05)
            stopped = time.monotonic()
            httpx.post(f"{api}/models/{NAME}/requests/gpu-abort/abort", json={}, timeout=30).raise_for_status()
            worker.join(300)
            assert answers and answers[0].status_code == 409, answers[0].text if answers else "no answer"
            generate(response_format="b64_json", n=1)
            return (
                f"progress {seen:.2f} seen, aborted: 409, next image {time.monotonic() - stopped:.1f}s after the abort"
            )

        def terminate() -> str:
            httpx.delete(f"{api}/models/{NAME}", timeout=120).raise_for_status()
            time.sleep(3)
            return f"GPU memory after: {_gpu_used_mib()} MiB (before launch: {before})"

        for name, step in (
            ("text to image, n=2", sizes_and_speed),
            ("same seed, same bytes", same_seed),
            ("url answer", url_answer),
            ("image to image", edit),
            ("progress and abort", progress_and_abort),
            ("terminate", terminate),
        ):
            check.run(name, step)
        return check.report()
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        print(f"server log: {home / 'server.out'}")


if __name__ == "__main__":
    sys.exit(main())
