"""OpenAI's image routes and Xinference's: ``POST /v1/images/generations`` (JSON), ``/v1/images/edits`` and
``/v1/images/variations`` (multipart, as OpenAI's), Xinference's ``/v1/images/inpainting``, the generated files
(``GET /v1/images/files/{name}``) and a running request's progress (``GET /v1/requests/{request_id}/progress``).

Requests take OpenAI's fields (``prompt``, ``n`` 1-10, ``size`` ``WxH``, ``response_format`` ``b64_json`` or
``url``, ``quality``, ``output_format``) and these extensions: ``negative_prompt``, ``num_inference_steps``,
``guidance_scale``, ``seed``, ``strength`` (edits), ``request_id``, ``keep_alive``; Xinference's client sends the
extensions JSON-encoded in a ``kwargs`` field and sizes as ``W*H``, both accepted. Every field is checked here, so
bad input is a 4xx naming it and never reaches the model. A request with a ``request_id`` can be aborted
(``POST /v1/models/{uid}/requests/{id}/abort``) and watched (its progress, 0.0-1.0); a client that leaves cancels
its generation too. The model stops between two denoising steps. No engine, torch or xoscar imports here.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import OrderedDict
from typing import Any, Literal

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse, Response
from pydantic import Field, ValidationError, field_validator
from starlette.datastructures import UploadFile

from xinference.api.answer import answer
from xinference.api.errors import validation_message
from xinference.api.gateway.keep_alive import note_keep_alive
from xinference.api.gateway.requests import RunningRequests
from xinference.api.gateway.routes import Replica, RouteTable
from xinference.api.openai.embeddings import check_model_type
from xinference.api.openai.image_files import ImageStore, decode_image, max_image_bytes
from xinference.api.openai.multipart import open_form
from xinference.api.protocol import OpenAIRequest, ResponseBody
from xinference.errors import InvalidRequest, RequestNotFound, RequestTooLarge

__all__ = [
    "MAX_SIDE",
    "MIN_SIDE",
    "ImageEditForm",
    "ImageGenerationRequest",
    "ImagesResponse",
    "ImagesService",
    "attach_router",
    "parse_size",
]

#: The sides a requested size may have, in pixels (multiples of 8, as latent diffusion needs).
MIN_SIDE = 64
MAX_SIDE = 2048
_SIZE = re.compile(r"^\s*(\d{1,5})\s*[x*×]\s*(\d{1,5})\s*$", re.IGNORECASE)
#: Fields Xinference's client may put in its JSON ``kwargs``: the extensions below
_KWARGS = ("negative_prompt", "num_inference_steps", "guidance_scale", "seed", "strength", "request_id", "quality")
#: Finished request ids whose progress (1.0) is still answered.
_FINISHED_MEMORY = 1024


def parse_size(value: str | None) -> tuple[int, int] | None:
    """``"1024x768"`` (OpenAI) or ``"1024*768"`` (Xinference) as (width, height); ``auto``/None: the model's own.
    ValueError says what is wrong (the request models turn it into a 400 naming ``size``)."""
    if value is None or value.strip().lower() in ("", "auto", "original"):
        return None
    match = _SIZE.match(value)
    if match is None:
        raise ValueError(f"size {value[:40]!r} is not WIDTHxHEIGHT (e.g. 512x512) or auto")
    width, height = int(match.group(1)), int(match.group(2))
    for side in (width, height):
        if not MIN_SIDE <= side <= MAX_SIDE or side % 8:
            raise ValueError(
                f"size {width}x{height}: each side must be a multiple of 8 from {MIN_SIDE} to {MAX_SIDE} pixels"
            )
    return width, height


# -- protocol ----------------------------------------------------------------------------------------------------------
class _ImageFields(OpenAIRequest):
    """What generations and edits share, in OpenAI's order, then the extensions."""

    model: str = Field(min_length=1)
    prompt: str = Field(default="", max_length=32000)
    n: int = Field(default=1, ge=1, le=10)
    size: str | None = Field(default=None, description="WIDTHxHEIGHT (or W*H), multiples of 8; auto: the model's")
    response_format: Literal["url", "b64_json"] = "url"
    quality: Literal["auto", "low", "medium", "high", "standard", "hd"] | None = Field(
        default=None, description="low: half the default steps, high/hd: one and a half times (no effect with steps)"
    )
    output_format: Literal["png", "jpeg", "webp"] = "png"
    # -- extensions (Xinference, diffusers)
    negative_prompt: str | None = Field(default=None, max_length=32000)
    num_inference_steps: int | None = Field(default=None, ge=1, le=200)
    guidance_scale: float | None = Field(default=None, ge=0.0, le=50.0)
    seed: int | None = Field(default=None, ge=0, lt=2**63, description="the same seed gives the same images")
    request_id: str | None = Field(default=None, min_length=1, max_length=256)
    keep_alive: str | int | float | None = None
    kwargs: str | dict[str, Any] | None = Field(default=None, description="Xinference's client: the extensions")

    @field_validator("size")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        parse_size(value)
        return value

    @field_validator("negative_prompt")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value else None

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Any:
        """Validate ``data`` with Xinference's ``kwargs`` unpacked into the fields; 400 naming the field."""
        raw = data.get("kwargs")
        if isinstance(raw, str) and raw.strip():
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise InvalidRequest("kwargs is not a JSON object", param="kwargs") from None
        if raw not in (None, "") and not isinstance(raw, dict):
            raise InvalidRequest("kwargs must be a JSON object", param="kwargs")
        merged = {k: v for k, v in data.items() if k != "kwargs" and v is not None}
        for key, value in (raw or {}).items():
            if key not in _KWARGS:
                raise InvalidRequest(
                    f"kwargs.{key[:40]} is not an option here; these are: {', '.join(_KWARGS)}", param=f"kwargs.{key}"
                )
            if value is not None:
                merged.setdefault(key, value)
        try:
            return cls.model_validate(merged)
        except ValidationError as exc:
            message, field = validation_message(list(exc.errors()))
            raise InvalidRequest(message, param=field) from None

    def to_engine_params(self, task: str) -> dict[str, Any]:
        size = parse_size(self.size)
        return {
            "task": task,
            "prompt": self.prompt,
            "negative_prompt": self.negative_prompt,
            "n": self.n,
            "width": size[0] if size else None,
            "height": size[1] if size else None,
            "num_inference_steps": self.num_inference_steps,
            "guidance_scale": self.guidance_scale,
            "seed": self.seed,
            "quality": self.quality,
            "output_format": self.output_format,
            "request_id": self.request_id,
        }


class ImageGenerationRequest(_ImageFields):
    """``POST /v1/images/generations``."""

    @field_validator("prompt")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("prompt is empty: say what to draw")
        return value


class ImageEditForm(_ImageFields):
    """The form fields of ``/v1/images/edits``, ``/variations`` and ``/inpainting`` (the files are read apart)."""

    strength: float | None = Field(default=None, gt=0.0, le=1.0, description="how much of the input is redrawn")

    def to_engine_params(self, task: str) -> dict[str, Any]:
        return {**super().to_engine_params(task), "strength": self.strength}


class ImageData(ResponseBody):
    b64_json: str | None = None
    url: str | None = None
    revised_prompt: str | None = None


class ImagesResponse(ResponseBody):
    """OpenAI's images answer; ``seed`` (the one used: send it back for the same images) is an extension."""

    created: int
    data: list[ImageData]
    size: str | None = None
    output_format: str | None = None
    quality: str | None = None
    seed: int | None = None


# -- serving -----------------------------------------------------------------------------------------------------------
class ImagesService:
    """Runs image requests against the model actors found through the route table; ``running`` is the API's table
    of requests by id (shared with chat, so the abort route finds them)."""

    def __init__(self, routes: RouteTable, running: RunningRequests, store: ImageStore) -> None:
        self._routes = routes
        self._running = running
        self.store = store
        #: request id -> the replica generating it, while it runs (None: not on a replica yet, progress 0)
        self._where: dict[str, Replica | None] = {}
        self._finished: OrderedDict[str, float] = OrderedDict()

    async def generate(self, body: _ImageFields, task: str, params: dict[str, Any], base_url: str) -> dict[str, Any]:
        route = await self._routes.get(body.model)
        what = {"text2image": "text to image", "image2image": "image edits", "inpainting": "inpainting"}[task]
        check_model_type(route, "image", task, what)
        note_keep_alive(self._routes, route, body.keep_alive)
        request_id = body.request_id
        entry = self._running.start(route.model_uid, request_id) if request_id is not None else None
        if request_id is not None:
            self._where[request_id] = None

        def call(replica: Replica) -> Any:
            if request_id is not None:
                self._where[request_id] = replica
            return replica.ref.generate_images(params)

        try:
            result, _ = await self._running.run(entry, self._routes.call(route, call))
        finally:
            if request_id is not None:
                self._where.pop(request_id, None)
        if request_id is not None:
            self._finished[request_id] = 1.0
            while len(self._finished) > _FINISHED_MEMORY:
                self._finished.popitem(last=False)
        return await self._answer(result, body, base_url)

    async def _answer(self, result: dict[str, Any], body: _ImageFields, base_url: str) -> dict[str, Any]:
        import base64

        data: list[dict[str, Any]] = []
        for image in result["images"]:
            if body.response_format == "b64_json":
                data.append({"b64_json": base64.b64encode(image).decode("ascii")})
            else:
                name = await asyncio.to_thread(self.store.save, image, body.output_format)
                data.append({"url": f"{base_url.rstrip('/')}/v1/images/files/{name}"})
        return {
            "created": int(time.time()),
            "data": data,
            "size": f"{result['width']}x{result['height']}",
            "output_format": body.output_format,
            "quality": body.quality or "auto",
            "seed": result["seed"],
        }

    async def progress(self, request_id: str) -> dict[str, float]:
        """Xinference's answer, ``{"progress": 0.0-1.0}``; RequestNotFound when no request runs or ran lately."""
        if request_id in self._where:
            replica = self._where[request_id]
            value = await replica.ref.request_progress(request_id) if replica is not None else None
            return {"progress": float(value or 0.0)}
        if request_id in self._finished:
            return {"progress": 1.0}
        raise RequestNotFound(f"no image request runs or ran lately under the id {request_id[:80]!r}")


async def read_edit_form(request: Request, route_kind: str) -> tuple[ImageEditForm, bytes, bytes | None]:
    """The validated form fields, the input image and the mask (PNG bytes, checked); 400/413 naming the part.

    ``route_kind``: ``edits`` (``image`` or ``image[]``, Xinference's ``images``; an optional ``mask``),
    ``variations`` (``image``, no mask) or ``inpainting`` (``image`` and ``mask_image``, Xinference's)."""
    limit = max_image_bytes()
    form = await open_form(
        request,
        files_bytes=2 * limit,
        too_large="too large for two images",
        extra="image",
        not_multipart="send the image as multipart/form-data with an 'image' part",
        param="image",
        max_files=4,
    )
    try:
        images: list[UploadFile] = []
        masks: list[UploadFile] = []
        fields: dict[str, Any] = {}
        for key, value in form.multi_items():
            if isinstance(value, UploadFile):
                if key in ("image", "image[]", "images", "images[]"):
                    images.append(value)
                elif key in ("mask", "mask_image"):
                    masks.append(value)
                continue
            fields[key] = value
        if not images:
            raise InvalidRequest("the form has no 'image' part holding the image to work from", param="image")
        if len(images) > 1:
            raise InvalidRequest("send one input image: diffusers' pipelines work from one", param="image")
        if route_kind == "inpainting" and not masks:
            raise InvalidRequest("inpainting needs a 'mask_image' part (white: repaint, black: keep)", param="mask")
        if route_kind == "variations":
            masks = []
        body: ImageEditForm = ImageEditForm.parse(fields)
        image = await _read(images[0], limit, "image")
        mask = await _read(masks[0], limit, "mask") if masks else None
    finally:
        await form.close()
    image_png, _ = await asyncio.to_thread(decode_image, image, "image")
    mask_png = (await asyncio.to_thread(decode_image, mask, "mask", True))[0] if mask is not None else None
    return body, image_png, mask_png


async def _read(upload: UploadFile, limit: int, part: str) -> bytes:
    if upload.size is not None and upload.size > limit:
        raise RequestTooLarge(f"the {part} is {upload.size / 1024**2:.1f} MiB; the limit is {limit // 1024**2} MiB")
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise RequestTooLarge(f"the {part} is over the limit of {limit // 1024**2} MiB", param=part)
    return data


# -- routes ------------------------------------------------------------------------------------------------------------
router = APIRouter()


def _service(request: Request) -> ImagesService:
    service: ImagesService = request.app.state.images
    return service


def _base_url(request: Request) -> str:
    return str(request.base_url)


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InvalidRequest("the body is not JSON", param=None) from None
    if not isinstance(data, dict):
        raise InvalidRequest("the body must be a JSON object", param=None)
    return data


_FORM_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["image", "model"],
                    "properties": {
                        "image": {"type": "string", "format": "binary"},
                        "mask": {"type": "string", "format": "binary"},
                        "model": {"type": "string"},
                        "prompt": {"type": "string"},
                        "n": {"type": "integer"},
                        "size": {"type": "string"},
                        "response_format": {"type": "string", "enum": ["url", "b64_json"]},
                        "strength": {"type": "number"},
                        "seed": {"type": "integer"},
                        "num_inference_steps": {"type": "integer"},
                    },
                }
            }
        },
    }
}


@router.post(
    "/v1/images/generations",
    response_model=ImagesResponse,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": ImageGenerationRequest.model_json_schema()}},
        }
    },
)
async def create_images(request: Request) -> Response:
    body: ImageGenerationRequest = ImageGenerationRequest.parse(await _json_body(request))
    work = _service(request).generate(body, "text2image", body.to_engine_params("text2image"), _base_url(request))
    return await answer(request, False, work)


async def _edit(request: Request, route_kind: str) -> Response:
    body, image, mask = await read_edit_form(request, route_kind)
    task = "inpainting" if mask is not None else "image2image"
    params = {**body.to_engine_params(task), "image": image, "mask": mask}
    return await answer(request, False, _service(request).generate(body, task, params, _base_url(request)))


@router.post("/v1/images/edits", response_model=ImagesResponse, openapi_extra=_FORM_BODY)
async def create_image_edits(request: Request) -> Response:
    return await _edit(request, "edits")


@router.post("/v1/images/variations", response_model=ImagesResponse, openapi_extra=_FORM_BODY)
async def create_image_variations(request: Request) -> Response:
    return await _edit(request, "variations")


@router.post("/v1/images/inpainting", response_model=ImagesResponse, openapi_extra=_FORM_BODY)
async def create_inpainting(request: Request) -> Response:
    return await _edit(request, "inpainting")


@router.get("/v1/images/files/{name}", response_class=FileResponse)
async def image_file(name: str, request: Request) -> Response:
    path, media_type = _service(request).store.path(name)
    return FileResponse(path, media_type=media_type)


@router.get("/v1/requests/{request_id}/progress")
async def request_progress(request_id: str, request: Request) -> JSONResponse:
    return JSONResponse(await _service(request).progress(request_id))


def attach_router(app: FastAPI) -> None:
    app.include_router(router)
