"""Where replicas go: pure functions over the workers' facts, so every cluster shape is unit-tested.

Rules, in order:

1. ``worker_ip`` restricts the candidates to workers on that host (``host`` or ``host:port``).
2. ``gpu_idx`` (only with one target worker) names the GPUs to use; duplicates, negative or out-of-range indices
   are refused. ``n_gpu`` asks for a number of GPUs per replica, taken from the GPUs no replica uses yet;
   ``"auto"`` takes one free GPU per replica when the worker has one and falls back to the CPU otherwise;
   ``None``/``0`` means CPU only.
3. Replicas are spread: each goes to the candidate with the fewest replicas (counting the ones placed by the same
   call), ties broken by the most free memory, then by address for a stable order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from xinference.errors import InvalidRequest
from xinference.hardware import HardwareInfo

__all__ = ["Placement", "WorkerView", "parse_gpu_idx", "place_replicas", "worker_views"]


@dataclass
class WorkerView:
    """What placement needs to know about one worker."""

    address: str
    hardware: HardwareInfo
    replicas: int = 0
    gpus_in_use: set[int] = field(default_factory=set)

    @property
    def host(self) -> str:
        return self.address.rsplit(":", 1)[0]

    def free_gpus(self) -> list[int]:
        return [g.index for g in self.hardware.gpus if g.index not in self.gpus_in_use]


@dataclass(frozen=True)
class Placement:
    """One replica's worker and the GPU indices (as that worker numbers them) it may use."""

    address: str
    gpu_indices: tuple[int, ...] = ()


def worker_views(
    workers: Iterable[tuple[str, HardwareInfo]], held: Iterable[tuple[str, Sequence[int]]]
) -> list[WorkerView]:
    """The views placement ranks, built once per placement in one pass over what the cluster holds.

    ``workers`` is (address, hardware) of every worker that may take a replica; ``held`` is (worker address, GPU
    indices) of every replica that occupies a worker: started ones and those a launch has booked but not started
    yet. Each worker's view counts its replicas and the union of their GPUs; a replica on an address that is not
    among ``workers`` (its worker left) counts nowhere. O(workers + replicas), where a scan of every replica per
    worker made filling a large cluster quadratic (``benchmark/results/scale.md``).
    """
    counts: dict[str, int] = {}
    gpus: dict[str, set[int]] = {}
    for address, indices in held:
        counts[address] = counts.get(address, 0) + 1
        gpus.setdefault(address, set()).update(indices)
    return [
        WorkerView(address, hardware, counts.get(address, 0), set(gpus.get(address, ())))
        for address, hardware in workers
    ]


def parse_gpu_idx(value: object) -> tuple[int, ...] | None:
    """``gpu_idx`` from a launch: an int, a list of ints, or null. Anything else is a 400."""
    if value is None:
        return None
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(i, int) and not isinstance(i, bool) for i in items)
    ):
        raise InvalidRequest("gpu_idx must be a GPU index or a non-empty list of GPU indices", param="gpu_idx")
    if len(set(items)) != len(items):
        raise InvalidRequest(f"gpu_idx lists a GPU twice: {items}", param="gpu_idx")
    if any(i < 0 for i in items):
        raise InvalidRequest(f"gpu_idx cannot be negative: {items}", param="gpu_idx")
    return tuple(items)


def _candidates(workers: Sequence[WorkerView], worker_ip: str | None) -> list[WorkerView]:
    if not workers:
        raise InvalidRequest("no worker has joined this cluster yet", param="worker_ip")
    if worker_ip is None:
        return list(workers)
    chosen = [w for w in workers if worker_ip in (w.address, w.host)]
    if not chosen:
        known = ", ".join(sorted(w.address for w in workers))
        raise InvalidRequest(f"no worker at {worker_ip!r}; the workers are: {known}", param="worker_ip")
    return chosen


def _gpus_for(worker: WorkerView, n_gpu: int | str | None, gpu_idx: tuple[int, ...] | None) -> tuple[int, ...]:
    if gpu_idx is not None:
        known = {g.index for g in worker.hardware.gpus}
        missing = [i for i in gpu_idx if i not in known]
        if missing:
            raise InvalidRequest(
                f"gpu_idx {missing} does not exist on worker {worker.address} (it has {sorted(known) or 'no GPU'})",
                param="gpu_idx",
            )
        return gpu_idx
    free = worker.free_gpus()
    if n_gpu is None or n_gpu == 0:
        return ()
    if n_gpu == "auto":
        return tuple(free[:1])
    assert isinstance(n_gpu, int)
    if n_gpu > len(free):
        raise InvalidRequest(
            f"n_gpu={n_gpu} but worker {worker.address} has {len(free)} free GPU(s) of {len(worker.hardware.gpus)}",
            param="n_gpu",
        )
    return tuple(free[:n_gpu])


def place_replicas(
    workers: Sequence[WorkerView],
    replicas: int,
    n_gpu: int | str | None = "auto",
    worker_ip: str | None = None,
    gpu_idx: tuple[int, ...] | None = None,
) -> list[Placement]:
    """Choose a worker (and GPUs) for each of ``replicas`` replicas; InvalidRequest says why it cannot."""
    if replicas < 1:
        raise InvalidRequest("replica must be at least 1", param="replica")
    candidates = _candidates(workers, worker_ip)
    if gpu_idx is not None and (len(candidates) != 1 or replicas != 1):
        raise InvalidRequest("gpu_idx needs exactly one replica on one worker (set worker_ip)", param="gpu_idx")
    views = {w.address: WorkerView(w.address, w.hardware, w.replicas, set(w.gpus_in_use)) for w in candidates}
    placements = []
    for _ in range(replicas):
        ranked = sorted(views.values(), key=lambda w: (w.replicas, -w.hardware.ram_free_bytes, w.address))
        errors = []
        for view in ranked:
            try:
                gpus = _gpus_for(view, n_gpu, gpu_idx)
            except InvalidRequest as exc:
                errors.append(exc)
                continue
            view.replicas += 1
            view.gpus_in_use.update(gpus)
            placements.append(Placement(view.address, gpus))
            break
        else:
            raise errors[0]
    return placements
