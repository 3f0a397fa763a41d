"""Which engine can run which spec on which hardware, and why not.

Pure functions over the engine table, the catalog and hardware facts, so they are tested without processes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from xinference.engines.registry import ENGINE_ORDER, get_engine_class, resolve_engine_name
from xinference.errors import EngineRejected

if TYPE_CHECKING:
    from xinference.core.hardware import HardwareInfo
    from xinference.model.registry import SpecChoice

__all__ = ["EngineMatch", "choose_engine", "match_engine"]


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
    """Match ``engine`` against every candidate spec; the library check comes first."""
    cls = get_engine_class(engine)
    lib = cls.check_lib()
    if not lib:
        return EngineMatch(cls.name, (), (lib.reason,))
    accepted, reasons = [], []
    for choice in choices:
        verdict = cls.match(choice.family, choice.spec, hardware)
        if verdict:
            accepted.append(choice)
        else:
            reasons.append(verdict.reason)
    return EngineMatch(cls.name, tuple(accepted), tuple(reasons))


def choose_engine(requested: str | None, choices: list[SpecChoice], hardware: HardwareInfo) -> EngineMatch:
    """The engine to launch with: the requested one (EngineRejected quoting its reason when it cannot), or the
    first engine of :data:`ENGINE_ORDER` that accepts a choice (EngineRejected listing every reason otherwise)."""
    if requested is not None:
        found = match_engine(resolve_engine_name(requested), choices, hardware)
        if not found.ok:
            raise EngineRejected(
                f"engine {found.engine} cannot run {choices[0].family.model_name}: {found.reason()}",
                param="model_engine",
            )
        return found
    rejected = []
    for engine in ENGINE_ORDER:
        found = match_engine(engine, choices, hardware)
        if found.ok:
            return found
        rejected.append(f"{found.engine}: {found.reason()}")
    raise EngineRejected(
        f"no engine can run {choices[0].family.model_name} here ({'; '.join(rejected)})", param="model_engine"
    )
