"""Launch options of the sentence-transformers engine (embedding and rerank models).

Users pass these as extra launch kwargs (``xinference launch ... --max_batch_size 64``); unknown names are a 400.
"""

from __future__ import annotations

import os

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_BATCH_WINDOW_MS",
    "DEFAULT_MAX_BATCH_SIZE",
    "ResolvedSentenceTransformersConfig",
    "SentenceTransformersConfig",
    "default_threads",
    "passive_threads",
    "usable_cores",
]

#: Inputs per forward pass. On 2 CPU cores all-MiniLM-L6-v2 embeds 16 short sentences in one pass in ~65 ms
#: against ~180 ms one at a time; past a few dozen inputs padding waste and latency grow faster than throughput.
DEFAULT_MAX_BATCH_SIZE = 32
#: While requests are concurrent, a round waits for more to join its forward pass until none arrived for this long
#: (and never more than four times this in all). A lone client's requests never wait; requests arriving while a pass
#: runs join the next one.
DEFAULT_BATCH_WINDOW_MS = 2.0


def default_threads(cpu_count: int) -> int:
    """torch CPU threads when the user sets none: every core but one, which the API and the actors need.

    torch's OpenMP pool synchronises its threads at every operator. When another process takes one of them off
    the CPU the others spin at the barrier: on 2 busy cores, 2 threads decoded SmolLM2-135M at 2.8 tokens/s where
    1 thread kept 19, while on idle cores the second thread gained at most 25%.
    """
    return max(1, cpu_count - 1)


def passive_threads(cpu_count: int) -> int:
    """torch CPU threads when OpenMP threads sleep instead of spinning at barriers (``OMP_WAIT_POLICY=PASSIVE``,
    which this engine sets for its process): every core the process may use.

    Sleeping threads give their core back to the API and the other processes at once, so the collapse described
    in :func:`default_threads` does not happen: all-MiniLM-L6-v2 on 2 cores under a load average of ~19 embedded
    16 sentences in 253-667 ms with 2 passive threads against 435-684 ms with 1, where 2 spinning threads took
    6.7-11 s (medians of 10 passes, alternating, a busy shared machine: noisy).
    """
    return max(1, cpu_count)


def usable_cores(reported: int) -> int:
    """The cores the model process may run on: the worker's count (``reported``), narrowed by this process's own
    CPU affinity when the worker started it on fewer."""
    try:
        own = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity API (macOS, Windows)
        own = reported
    return max(1, min(reported, own))


class SentenceTransformersConfig(BaseModel):
    """What a user may set at launch; ``None`` means "use the model's own setting" or "size it for this worker"."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_batch_size: int = Field(default=DEFAULT_MAX_BATCH_SIZE, ge=1, le=4096, description="inputs per forward pass")
    batch_window_ms: float = Field(
        default=DEFAULT_BATCH_WINDOW_MS,
        ge=0.0,
        le=1000.0,
        description="quiet gap (ms) that closes the batching window; the window lasts "
        "at most 4 gaps and opens only while requests are concurrent",
    )
    max_length: int | None = Field(
        default=None,
        ge=8,
        le=1 << 17,
        description="tokens per input; longer inputs are truncated (default: the model's)",
    )
    n_threads: int | None = Field(default=None, ge=1, le=1024, description="torch CPU threads (of each worker)")
    queued_rounds: int = Field(
        default=1,
        ge=0,
        le=8,
        description="batches formed ahead of the running ones, so the model never waits for answers to make their "
        "round trip before the next batch is ready (0: form a batch only when a worker is free)",
    )
    n_workers: int | None = Field(
        default=None,
        ge=1,
        le=64,
        description="forward passes that compute at once, each on its own thread with n_threads torch threads "
        "(embedding models on CPU; default 1: on a busy 2-core host two passes of one thread each ran 3x slower "
        "than one pass of two threads, the threads queueing for the GIL)",
    )
    truncate_dimensions: bool = Field(
        default=False,
        description="allow requests to ask for fewer `dimensions` than the model's (Matryoshka-trained models only)",
    )
    device: str | None = Field(default=None, description="torch device (default: cuda when available, else cpu)")
    trust_remote_code: bool = Field(
        default=False,
        description="run the modelling code a model ships (jina, nomic, gte-multilingual): needed when its "
        "config.json has an auto_map",
    )
    rerank_instruction: str | None = Field(
        default=None,
        min_length=1,
        max_length=2000,
        description="Qwen3-Reranker: the task instruction in its prompt (default: the model card's web-search one)",
    )

    def resolve(self, *, cpu_count: int, gpu: bool, passive_wait: bool = False) -> ResolvedSentenceTransformersConfig:
        """The options for a process that may use ``cpu_count`` cores; ``passive_wait``: its OpenMP threads sleep
        at barriers (then every core gets a thread, else one is left to the API and the actors)."""
        threads = passive_threads(cpu_count) if passive_wait else default_threads(cpu_count)
        device = self.device or ("cuda" if gpu else "cpu")
        # an accelerator runs one pass at a time anyway
        workers = self.n_workers if self.n_workers is not None and device == "cpu" else 1
        return ResolvedSentenceTransformersConfig(
            **self.model_dump(exclude={"n_threads", "n_workers", "device"}),
            n_threads=self.n_threads or max(1, threads // workers),
            n_workers=workers,
            device=device,
        )


class ResolvedSentenceTransformersConfig(SentenceTransformersConfig):
    """The options actually used."""

    n_threads: int
    n_workers: int
    device: str
