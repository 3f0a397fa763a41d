"""Which engine can run which spec on which hardware, and why not.

Pure functions over the engine table, the catalog and hardware facts, so they are tested without processes; what
this machine has installed is looked at in :mod:`xinference.engines.libraries`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from xinference.engines.base import Verdict
from xinference.engines.registry import ENGINE_ORDER, engine_order, get_engine_class, resolve_engine_name
from xinference.errors import EngineRejected

if TYPE_CHECKING:
    from xinference.hardware import HardwareInfo
    from xinference.model.registry import SpecChoice
    from xinference.model.spec import ModelSpec

__all__ = [
    "EngineMatch",
    "choose_engine",
    "engine_params",
    "engine_table",
    "match_engine",
]


@dataclass(frozen=True)
class EngineMatch:
    """The result of matching one engine: the choices it accepts, or the reasons it rejects each one."""

    engine: str
    accepted: tuple[SpecChoice, ...]
    reasons: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return bool(self.accepted)

    def reason(self) -> str:
        """One sentence (or a few, deduplicated) saying why the engine cannot run any of the choices."""
        unique = list(dict.fromkeys(self.reasons))
        return "; ".join(unique) if unique else f"{self.engine} cannot run this model"


def match_engine(engine: str, choices: list[SpecChoice], hardware: HardwareInfo) -> EngineMatch:
    """Match ``engine`` against every candidate spec, then check its library.

    Fit comes first because it is the more useful sentence: on a CPU-only worker "vLLM needs a CUDA GPU on Linux"
    says more than "vLLM is not installed". The library is checked only when some spec fits.
    """
    cls = get_engine_class(engine)
    accepted, reasons = [], []
    for choice in choices:
        verdict = cls.match(choice.family, choice.spec, hardware)
        if verdict:
            accepted.append(choice)
        else:
            reasons.append(verdict.reason)
    if accepted:
        lib = library_verdict(cls.name, hardware)
        if not lib:
            return EngineMatch(cls.name, (), (lib.reason,))
    return EngineMatch(cls.name, tuple(accepted), tuple(reasons))


def library_verdict(engine: str, hardware: HardwareInfo) -> Verdict:
    """Whether ``engine``'s library is available on the worker described by ``hardware``: its own report when it
    sent one, else a check of this machine."""
    if hardware.engines is not None and engine in hardware.engines:
        reason = hardware.engines[engine]
        return Verdict.reject(reason) if reason else Verdict.ok()
    return get_engine_class(engine).check_lib()


def engine_params(accepted: Iterable[SpecChoice]) -> list[dict[str, Any]]:
    """Accepted choices grouped per spec, in Xinference's ``/v1/engines`` shape (one entry per format and size,
    with its quantizations)."""
    grouped: dict[int, dict[str, Any]] = {}
    for choice in accepted:
        spec = choice.spec
        entry = grouped.get(id(spec))
        if entry is None:
            entry = grouped[id(spec)] = {
                "model_name": choice.family.model_name,
                "model_format": spec.model_format,
                "model_size_in_billions": spec.model_size_in_billions,
                "quantizations": [],
                "model_hub": "bundled" if spec.bundled is not None else _hub_of(spec),
            }
            if spec.multimodal_projectors:  # as Xinference lists them: what multimodal_projector may pick
                entry["multimodal_projectors"] = list(spec.multimodal_projectors)
        if choice.quantization not in entry["quantizations"]:
            entry["quantizations"].append(choice.quantization)
    return list(grouped.values())


def engine_table(
    choices: list[SpecChoice], workers_hardware: Sequence[HardwareInfo], labels: Sequence[str] | None = None
) -> dict[str, list[dict[str, Any]] | str]:
    """For every engine serving this model type: the params it accepts somewhere in the cluster, or why not.

    An engine is accepted when at least one worker accepts a spec (the params are the union over workers);
    otherwise its value is the rejection sentence, deduplicated across workers, and prefixed by the worker's
    label (``labels[i]``, e.g. its address) when workers disagree.
    """
    if not choices:
        return {}
    model_type = choices[0].family.model_type
    table: dict[str, list[dict[str, Any]] | str] = {}
    for engine in ENGINE_ORDER:
        cls = get_engine_class(engine)
        if model_type not in cls.model_types:
            continue
        if not workers_hardware:
            table[cls.name] = "no worker has joined this cluster yet"
            continue
        accepted: dict[tuple[int, str], SpecChoice] = {}
        per_worker: list[str] = []
        for hardware in workers_hardware:
            found = match_engine(engine, choices, hardware)
            for choice in found.accepted:
                accepted.setdefault((id(choice.spec), choice.quantization), choice)
            per_worker.append(found.reason() if not found.ok else "")
        if accepted:
            table[cls.name] = engine_params(accepted.values())
            continue
        names = list(labels) if labels is not None else [f"worker {i}" for i in range(len(workers_hardware))]
        by_reason: dict[str, list[str]] = {}
        for name, reason in zip(names, per_worker, strict=False):
            by_reason.setdefault(reason, []).append(name)
        if len(by_reason) == 1:
            table[cls.name] = per_worker[0]
        else:
            table[cls.name] = "; ".join(f"{', '.join(who)}: {reason}" for reason, who in by_reason.items())
    return table


def _hub_of(spec: ModelSpec) -> str:
    if spec.hub_id("huggingface"):
        return "huggingface"
    if spec.hub_id("modelscope"):
        return "modelscope"
    return "local"


def choose_engine(requested: str | None, choices: list[SpecChoice], hardware: HardwareInfo) -> EngineMatch:
    """The engine to launch with: the requested one (EngineRejected quoting its reason when it cannot), or the
    first engine of ``engine_order(hardware, model_type)`` that accepts a choice (EngineRejected listing every reason
    otherwise)."""
    if requested is not None:
        found = match_engine(resolve_engine_name(requested), choices, hardware)
        if not found.ok:
            raise EngineRejected(
                f"engine {found.engine} cannot run {choices[0].family.model_name}: {found.reason()}",
                param="model_engine",
            )
        return found
    rejected = []
    model_type = choices[0].family.model_type
    for engine in engine_order(hardware, model_type):
        if model_type not in get_engine_class(engine).model_types:
            continue  # "does not serve this type" is no reason worth listing
        found = match_engine(engine, choices, hardware)
        if found.ok:
            return found
        rejected.append(f"{found.engine}: {found.reason()}")
    raise EngineRejected(
        f"no engine can run {choices[0].family.model_name} here ({'; '.join(rejected)})", param="model_engine"
    )
