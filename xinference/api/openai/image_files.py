"""Images in and out of the image routes: uploads checked and decoded (Pillow) before any model is called, and the
generated files served back for ``response_format=url``.

Uploads: a file over ``XINFERENCE_MAX_IMAGE_BYTES`` (20 MiB by default) is a 413; one that is not an image, or is
larger than :data:`MAX_INPUT_PIXELS`, a 400 naming the form part. The model process gets a clean PNG (RGB for an
image, one channel for a mask). A mask follows OpenAI's rule when it has transparency (fully transparent pixels
are the ones to repaint) and diffusers' otherwise (white repaints, black keeps).

Generated files: ``XINFERENCE_HOME/images/<random>.<format>``, served by ``GET /v1/images/files/{name}`` behind
the same API keys as every route; at most ``XINFERENCE_IMAGE_FILES_MAX`` files (500) are kept, none older than
``XINFERENCE_IMAGE_FILES_TTL`` seconds (3600): the oldest go first.
"""

from __future__ import annotations

import io
import os
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from xinference.errors import ImageNotFound, InvalidRequest, ModelUnavailable, RequestTooLarge

__all__ = ["MAX_INPUT_PIXELS", "ImageStore", "decode_image", "max_image_bytes"]

#: The largest input image accepted, in pixels (4096 x 4096); Pillow's own bomb check stays on beyond it.
MAX_INPUT_PIXELS = 4096 * 4096
_DEFAULT_MAX_BYTES = 20 * 1024 * 1024
_NAME = re.compile(r"^[0-9a-f]{32}\.(png|jpeg|webp)$")
MEDIA_TYPES = {"png": "image/png", "jpeg": "image/jpeg", "webp": "image/webp"}


def _env_int(name: str, default: int) -> int:
    try:
        value = int(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def max_image_bytes() -> int:
    """The largest image upload accepted (``XINFERENCE_MAX_IMAGE_BYTES``, default 20 MiB)."""
    return _env_int("XINFERENCE_MAX_IMAGE_BYTES", _DEFAULT_MAX_BYTES)


def decode_image(data: bytes, part: str, mask: bool = False) -> tuple[bytes, tuple[int, int]]:
    """``data`` (any format Pillow reads) as PNG bytes and its (width, height). Blocking: call it on a thread.
    ``mask``: one channel, white where the model repaints. InvalidRequest / RequestTooLarge name ``part``."""
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError:
        raise ModelUnavailable(
            "reading images needs Pillow on the API server: pip install 'xinference[image]'"
        ) from None
    limit = max_image_bytes()
    if len(data) > limit:
        raise RequestTooLarge(
            f"the {part} is {len(data) / 1024**2:.1f} MiB; images are limited to {limit / 1024**2:.0f} MiB", param=part
        )
    if not data:
        raise InvalidRequest(f"the {part} is empty", param=part)
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_INPUT_PIXELS:
                raise RequestTooLarge(
                    f"the {part} is {width}x{height}; input images are limited to {MAX_INPUT_PIXELS} pixels", param=part
                )
            image.load()
            if mask:
                converted = _mask(image)
            else:
                converted = image.convert("RGB")
    except (InvalidRequest, RequestTooLarge):
        raise
    except (UnidentifiedImageError, OSError, ValueError, Image.DecompressionBombError) as exc:
        raise InvalidRequest(f"the {part} is not an image Pillow can read: {exc}", param=part) from None
    out = io.BytesIO()
    converted.save(out, format="PNG")
    return out.getvalue(), (width, height)


def _mask(image: Any) -> Any:
    """White where to repaint: transparent pixels (OpenAI's masks) when the image has any, else its luminance."""
    from PIL import ImageChops

    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        alpha = image.convert("RGBA").getchannel("A")
        low = alpha.getextrema()[0]
        if isinstance(low, int | float) and low < 255:
            return ImageChops.invert(alpha)
    return image.convert("L")


class ImageStore:
    """Generated images kept for their URLs, bounded in count and age."""

    def __init__(self, root: Path, max_files: int | None = None, max_age: float | None = None) -> None:
        self.root = root
        self.max_files = max_files or _env_int("XINFERENCE_IMAGE_FILES_MAX", 500)
        self.max_age = max_age or float(_env_int("XINFERENCE_IMAGE_FILES_TTL", 3600))
        self._lock = threading.Lock()

    def save(self, data: bytes, fmt: str) -> str:
        """Write ``data`` and return its file name (random: names are not guessable). Blocking."""
        self.root.mkdir(parents=True, exist_ok=True)
        name = f"{uuid.uuid4().hex}.{fmt}"
        tmp = self.root / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.root / name)
        self.prune()
        return name

    def prune(self) -> None:
        """Remove files past their age, then the oldest beyond the count."""
        with self._lock:
            try:
                entries = [(entry.stat().st_mtime, entry) for entry in self.root.iterdir() if _NAME.match(entry.name)]
            except OSError:
                return
            entries.sort()
            cutoff = time.time() - self.max_age
            excess = len(entries) - self.max_files
            for index, (mtime, entry) in enumerate(entries):
                if mtime < cutoff or index < excess:
                    entry.unlink(missing_ok=True)

    def path(self, name: str) -> tuple[Path, str]:
        """The file of ``name`` and its media type; ImageNotFound when it is not (or no longer) here."""
        match = _NAME.match(name)
        if match is None:
            raise ImageNotFound(f"no image file {name[:80]!r}")
        path = self.root / name
        try:
            fresh = time.time() - path.stat().st_mtime <= self.max_age
        except OSError:
            fresh = False
        if not fresh:
            raise ImageNotFound(f"no image file {name!r}: never made here, or removed since (images are kept a while)")
        return path, MEDIA_TYPES[match.group(1)]
