"""Embedding and rerank models through ``sentence-transformers``, with concurrent requests batched.

One adapter serves both model types: an ``embedding`` family loads a ``SentenceTransformer`` bi-encoder, a
``rerank`` family a ``CrossEncoder``. Every request goes through a :class:`~.batcher.Batcher`, so concurrent
requests share forward passes (the model runs on one worker thread; the actor's event loop stays free).

Inputs longer than the model's maximum are truncated, as sentence-transformers does; usage counts the tokens the
model actually saw. Each forward pass tokenizes its texts once: the token lengths give the usage and the plan of
sub-batches (:mod:`.grouping`: sorted by length so little compute goes to padding), and the same token ids are
padded per sub-batch and run through the model. A model whose own ``encode`` does more than that (a default
prompt, another input module) is noticed by a check at load, and then runs through ``encode`` per sub-batch.
Token-array inputs (OpenAI's ``input: [[id, ...]]``) are the model's own token ids: they are
decoded with its tokenizer and embedded like text.

The batcher keeps one batch formed and queued behind the running one (``queued_rounds``), so the model goes
from one forward pass to the next without waiting for answers to travel back through the API and the clients'
next requests to come in. On CPU an embedding model that takes the direct path may run ``n_workers`` passes at
once, each on its own thread (default 1: see the option's description); the tokenizer, which is not safe to call
from two threads, is used under a lock. Other models (rerankers, models served through ``encode``) run one pass
at a time with all the threads.

A reranker that is a causal LM (Qwen3-Reranker: ``Qwen3ForCausalLM``) has no classification head for a
``CrossEncoder``; it is scored by :class:`~.causal_rerank.YesNoScorer` through its prompt and yes/no logits. Other
causal-LM rerankers are refused by :meth:`SentenceTransformersEngine.match`. A model whose ``config.json`` maps its
classes to its own code (``auto_map``: jina, nomic, gte-multilingual) loads only when the launch sets
``trust_remote_code=true``: without it transformers would build a different class and the weights would not fit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, ClassVar, Iterator

from xinference.engines.answers import embeddings_answer, encode_embedding, rerank_answer
from xinference.engines.base import Engine, Verdict
from xinference.engines.libraries import TRANSFORMERS_HINT
from xinference.engines.sentence_transformers.batcher import Batcher
from xinference.engines.sentence_transformers.causal_rerank import (
    YesNoScorer,
    causal_architecture,
    unsupported_causal_reranker,
)
from xinference.engines.sentence_transformers.config import (
    ResolvedSentenceTransformersConfig,
    SentenceTransformersConfig,
    usable_cores,
)
from xinference.engines.sentence_transformers.grouping import plan_groups
from xinference.errors import EngineError, InvalidRequest, LaunchFailed, ModelUnavailable, XinferenceError

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.spec import ModelFamily, ModelSpec

__all__ = ["SentenceTransformersEngine"]

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def _backend_errors() -> Iterator[None]:
    """Translate what torch / sentence-transformers raise while serving into the platform's errors."""
    try:
        yield
    except XinferenceError:
        raise
    except Exception as exc:  # noqa: BLE001 - every backend failure becomes an EngineError, chained
        raise EngineError(f"sentence-transformers failed: {type(exc).__name__}: {exc}") from exc


def _passive_openmp() -> bool:
    """Make this process's OpenMP threads sleep, not spin, while they wait (``OMP_WAIT_POLICY=PASSIVE``); returns
    whether they will.

    OpenMP reads the variable once, when torch first loads it, so it can only be set before this process imports
    torch (model processes import it only when an engine loads). A value the user set is kept.
    """
    import sys

    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE"


class SentenceTransformersEngine(Engine):
    """Bi-encoder embeddings and cross-encoder reranking on CPU or GPU."""

    name: ClassVar[str] = "sentence_transformers"
    model_types: ClassVar[frozenset[str]] = frozenset({"embedding", "rerank"})
    model_formats: ClassVar[frozenset[str]] = frozenset({"pytorch"})
    config_class = SentenceTransformersConfig

    resolved: ResolvedSentenceTransformersConfig
    _model: Any = None
    _thread: ThreadPoolExecutor | None = None
    _batcher: Batcher[Any, Any] | None = None
    _max_length: int = 512
    _dimensions: int | None = None
    #: whether this model's embeddings come from padding our token ids and calling the model (checked at load)
    _direct: bool = False
    #: the yes/no scorer of a causal-LM reranker (Qwen3-Reranker); None for cross-encoders
    _scorer: YesNoScorer | None = None
    #: forward passes that run at once (``n_workers`` where the model allows it, else 1)
    _workers: int = 1
    #: held around every tokenizer call: a fast tokenizer refuses to be used from two threads at once
    _tokenizer_lock: threading.Lock

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tokenizer_lock = threading.Lock()

    @classmethod
    def match(cls, family: ModelFamily, spec: ModelSpec, hardware: HardwareInfo) -> Verdict:
        verdict = super().match(family, spec, hardware)
        if verdict and family.model_type == "rerank":
            reason = unsupported_causal_reranker(family.architectures)
            if reason is not None:
                return Verdict.reject(reason)
        return verdict

    # -- life cycle ----------------------------------------------------------------------------------------------
    async def load(self) -> None:
        assert isinstance(self.config, SentenceTransformersConfig)
        cores = usable_cores(self.hardware.cpu_count)
        self.resolved = self.config.resolve(
            cpu_count=cores, gpu=self.hardware.cuda_available, passive_wait=_passive_openmp()
        )
        # Weights are always local here: never let the hub client reach for the network.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        model_config = _read_model_config(self.model_path)
        if model_config.get("auto_map") and not self.resolved.trust_remote_code:
            raise LaunchFailed(
                f"{self.family.model_name} ships its own modelling code (auto_map in its config.json), which runs "
                "only when the launch allows it: launch it again with trust_remote_code=true if you trust its "
                "authors"
            )
        architectures = model_config.get("architectures") or self.family.architectures
        if self.family.model_type == "rerank":
            reason = unsupported_causal_reranker(architectures)
            if reason is not None:
                raise LaunchFailed(reason)
        logger.info("loading %s with sentence-transformers: %s", self.model_uid, self.resolved.model_dump())
        # Load and every forward pass run on this one thread: torch's CPU thread pool is per calling thread, and
        # a second pool on a small machine halves the speed of both.
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"st-{self.model_uid}")
        loop = asyncio.get_running_loop()
        try:
            self._model = await loop.run_in_executor(self._thread, self._load_model)
        except ImportError as exc:
            raise LaunchFailed(
                f"sentence_transformers needs torch and sentence-transformers ({TRANSFORMERS_HINT}): {exc}"
            ) from exc
        except Exception as exc:  # noqa: BLE001 - the backend's own text is the useful part
            raise LaunchFailed(f"sentence-transformers could not load {self.model_uid}: {exc}") from exc
        forward = self._embed_forward if self.family.model_type == "embedding" else self._rerank_forward
        executor = self._thread
        workers = self.resolved.n_workers if self._direct else 1
        if workers == 1 and self.resolved.n_workers > 1:
            # one pass at a time (a reranker, a model served through encode): it gets every worker's threads
            threads = self.resolved.n_threads * self.resolved.n_workers
            await loop.run_in_executor(self._thread, _set_torch_threads, threads)
        elif workers > 1:
            # Each worker thread sets its own torch threads (torch's CPU thread count is per calling thread).
            executor = ThreadPoolExecutor(
                max_workers=workers,
                thread_name_prefix=f"st-{self.model_uid}-pass",
                initializer=_set_torch_threads,
                initargs=(self.resolved.n_threads,),
            )
            self._thread.shutdown(wait=False)
            self._thread = executor
        self._workers = workers
        self._batcher = Batcher(
            forward,
            max_batch_size=self.resolved.max_batch_size,
            window_s=self.resolved.batch_window_ms / 1000.0,
            executor=executor,
            name=f"st-{self.model_uid}",
            workers=workers,
            rounds=workers + self.resolved.queued_rounds,
        )

    def _load_model(self) -> Any:
        import torch

        cfg = self.resolved
        torch.set_num_threads(cfg.n_threads)
        common: dict[str, Any] = {
            "device": cfg.device,
            "local_files_only": True,
            "trust_remote_code": cfg.trust_remote_code,
        }
        if self.family.model_type == "embedding":
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(self.model_path, **common)
            limit = cfg.max_length or self.family.max_tokens or model.max_seq_length or 512
            model.max_seq_length = limit
            self._max_length = int(limit)
            getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
            self._dimensions = getter()
            model.eval()
            self._direct = self._direct_path_matches(model)
        elif causal_architecture(self._architectures()) is not None:
            return self._load_causal_reranker()
        else:
            from sentence_transformers import CrossEncoder

            model = CrossEncoder(self.model_path, max_length=cfg.max_length or self.family.max_tokens, **common)
            self._max_length = int(getattr(model, "max_seq_length", None) or model.tokenizer.model_max_length)
        model.eval()
        return model

    def _architectures(self) -> list[str]:
        found = _read_model_config(self.model_path).get("architectures")
        return list(found) if isinstance(found, list) and found else list(self.family.architectures)

    def _load_causal_reranker(self) -> Any:
        """A causal-LM reranker (Qwen3-Reranker) with its yes/no scorer; returns the model."""
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        cfg = self.resolved
        common = {"local_files_only": True, "trust_remote_code": cfg.trust_remote_code}
        tokenizer = AutoTokenizer.from_pretrained(self.model_path, **common)
        dtype: Any = torch.float32 if cfg.device == "cpu" else "auto"
        model: Any = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=dtype, **common)
        model = model.to(cfg.device)
        model.eval()
        limit = cfg.max_length or self.family.max_tokens or 8192
        self._scorer = YesNoScorer(
            model, tokenizer, device=cfg.device, max_length=int(limit), instruction=cfg.rerank_instruction
        )
        self._max_length = int(limit)
        return model

    async def unload(self) -> None:
        if self._batcher is not None:
            batcher, self._batcher = self._batcher, None
            await batcher.close()
        if self._thread is not None:
            self._thread.shutdown(wait=False, cancel_futures=True)
            self._thread = None
        self._model = None
        self._scorer = None

    def stats(self) -> dict[str, Any]:
        """Batching counters (forward passes, requests, the most requests that shared one pass, the most passes
        that ran at once) and ``workers``."""
        if self._batcher is None:
            return {}
        return {**self._batcher.snapshot(), "workers": self._workers}

    def _ready(self) -> Batcher[Any, Any]:
        if self._batcher is None or self._model is None:
            raise ModelUnavailable(f"model {self.model_uid!r} is not loaded")
        return self._batcher

    # -- forward passes (worker thread) ------------------------------------------------------------------------
    def _tokenize(self, first: list[str], second: list[str] | None = None) -> dict[str, list[list[int]]]:
        """Token ids (and the tokenizer's other per-token lists), truncated to the model's maximum, unpadded."""
        with self._tokenizer_lock:
            encoded = self._model.tokenizer(
                first, second, truncation=True, max_length=self._max_length, add_special_tokens=True
            )
        return {key: list(values) for key, values in encoded.items()}

    def _padded(self, encoded: dict[str, list[list[int]]], group: list[int]) -> dict[str, Any]:
        """The ``group`` rows of ``encoded`` as tensors on the model's device, padded to the group's longest."""
        import torch

        tokenizer = self._model.tokenizer
        longest = max(len(encoded["input_ids"][i]) for i in group)
        left = getattr(tokenizer, "padding_side", "right") == "left"
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        features: dict[str, Any] = {}
        for key, values in encoded.items():
            fill = pad_id if key == "input_ids" else 0
            rows = []
            for i in group:
                padding = [fill] * (longest - len(values[i]))
                rows.append(padding + values[i] if left else values[i] + padding)
            features[key] = torch.tensor(rows, dtype=torch.long, device=self.resolved.device)
        return features

    def _embed_group(self, texts: list[str], encoded: dict[str, list[list[int]]], group: list[int]) -> Any:
        if self._direct:
            output = self._model(self._padded(encoded, group))["sentence_embedding"]
            return output.float().cpu().numpy()
        return self._model.encode(
            [texts[i] for i in group], batch_size=len(group), convert_to_numpy=True, show_progress_bar=False
        )

    def _embed_forward(self, texts: list[str]) -> list[tuple[Any, int]]:
        import torch

        with _backend_errors(), torch.inference_mode():
            encoded = self._tokenize(texts)
            lengths = [len(ids) for ids in encoded["input_ids"]]
            vectors: list[Any] = [None] * len(texts)
            for group in plan_groups(lengths):
                for index, vector in zip(group, self._embed_group(texts, encoded, group), strict=True):
                    vectors[index] = vector
        return list(zip(vectors, lengths, strict=True))

    def _direct_path_matches(self, model: Any) -> bool:
        """Whether padding our own token ids and calling ``model`` gives what ``model.encode`` gives (load time)."""
        import numpy as np
        import torch

        probe = ["probe", "a longer probe sentence, to check that padding is masked out"]
        saved, self._model = self._model, model
        try:
            with torch.inference_mode():
                encoded = self._tokenize(probe)
                ours = model(self._padded(encoded, [0, 1]))["sentence_embedding"].float().cpu().numpy()
                theirs = model.encode(probe, batch_size=2, convert_to_numpy=True, show_progress_bar=False)
            same = bool(np.allclose(ours, theirs, atol=1e-4))
        except Exception as exc:  # noqa: BLE001 - any failure just means: use encode
            logger.info("%s: embedding through encode (own tokens failed: %s)", self.model_uid, exc)
            return False
        finally:
            self._model = saved
        if not same:
            logger.info("%s: embedding through encode (its encode does more than the model's forward)", self.model_uid)
        return same

    def _rerank_forward(self, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        import torch

        if self._scorer is not None:
            return self._score_forward(self._scorer, pairs)
        with _backend_errors(), torch.inference_mode():
            encoded = self._tokenize([q for q, _ in pairs], [d for _, d in pairs])
            counts = [len(ids) for ids in encoded["input_ids"]]
            scores: list[float] = [0.0] * len(pairs)
            for group in plan_groups(counts):
                values = self._model.predict(
                    [pairs[i] for i in group], batch_size=len(group), convert_to_numpy=True, show_progress_bar=False
                )
                for index, value in zip(group, values, strict=True):
                    scores[index] = float(value)
        return list(zip(scores, counts, strict=True))

    def _score_forward(self, scorer: YesNoScorer, pairs: list[tuple[str, str]]) -> list[tuple[float, int]]:
        import torch

        with _backend_errors(), torch.inference_mode():
            rows = scorer.encode(pairs)
            counts = [len(row) for row in rows]
            scores: list[float] = [0.0] * len(pairs)
            for group in plan_groups(counts):
                for index, value in zip(group, scorer.score([rows[i] for i in group]), strict=True):
                    scores[index] = value
        return list(zip(scores, counts, strict=True))

    # -- embeddings ----------------------------------------------------------------------------------------------
    async def embed(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request``: ``input`` (a list of strings or token-id lists), ``encoding_format``, ``dimensions``."""
        if self.family.model_type != "embedding":
            raise self._unsupported("embed")
        batcher = self._ready()
        texts = [self._as_text(item, index) for index, item in enumerate(request["input"])]
        dimensions = self._check_dimensions(request.get("dimensions"))
        results = await batcher.submit(texts)
        encoding = request.get("encoding_format") or "float"
        embeddings = [_encode(vector, dimensions, encoding) for vector, _ in results]
        return embeddings_answer(embeddings, self.model_uid, sum(n for _, n in results))

    def _as_text(self, item: Any, index: int) -> str:
        if isinstance(item, str):
            return item
        tokenizer = self._model.tokenizer
        size = len(tokenizer)
        if not item or any(not isinstance(t, int) or t < 0 or t >= size for t in item):
            raise InvalidRequest(
                f"input[{index}] must be a non-empty list of this model's token ids (0 to {size - 1})", param="input"
            )
        with self._tokenizer_lock:
            text: str = tokenizer.decode(item, skip_special_tokens=True)
        return text

    def _check_dimensions(self, requested: int | None) -> int | None:
        native = self._dimensions
        if requested is None or requested == native:
            return None
        if native is not None and requested < native and self.resolved.truncate_dimensions:
            return requested
        if native is not None and requested < native:
            raise InvalidRequest(
                f"model {self.model_uid!r} returns {native}-dimensional embeddings and was not trained to be "
                f"shortened; omit dimensions (or launch it with truncate_dimensions=true if it is Matryoshka-trained)",
                param="dimensions",
            )
        raise InvalidRequest(
            f"model {self.model_uid!r} returns {native}-dimensional embeddings; dimensions cannot be {requested}",
            param="dimensions",
        )

    # -- rerank --------------------------------------------------------------------------------------------------
    async def rerank(self, request: dict[str, Any]) -> dict[str, Any]:
        """``request``: ``query``, ``documents`` (strings), ``top_n``, ``return_documents``."""
        if self.family.model_type != "rerank":
            raise self._unsupported("rerank")
        batcher = self._ready()
        query: str = request["query"]
        documents: list[str] = list(request["documents"])
        results = await batcher.submit([(query, doc) for doc in documents])
        return rerank_answer(
            [(index, score) for index, (score, _) in enumerate(results)],
            documents,
            request.get("top_n"),
            bool(request.get("return_documents")),
            sum(n for _, n in results),
        )


def _set_torch_threads(count: int) -> None:
    """A forward worker's initializer: its torch threads."""
    import torch

    torch.set_num_threads(count)


def _read_model_config(model_path: str) -> dict[str, Any]:
    """The model folder's ``config.json`` (empty when there is none, e.g. a folder laid out by sentence-transformers
    around a subfolder)."""
    path = os.path.join(model_path, "config.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _encode(vector: Any, dimensions: int | None, encoding: str) -> list[float] | str:
    """One embedding as OpenAI sends it: floats, or base64 of little-endian float32."""
    import numpy as np

    values = np.asarray(vector, dtype=np.float32)
    if dimensions is not None:
        values = values[:dimensions]
        norm = float(np.linalg.norm(values))
        if norm > 0:
            values = values / norm
    floats: list[float] = values.tolist()
    return encode_embedding(floats, encoding)
