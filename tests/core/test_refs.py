"""The actor references' Protocols (``core/refs.py``) say what each actor really answers.

Callers are type-checked against the Protocols, not the actors (xoscar types a reference as ``Any``), so a Protocol
that drifted from its actor would let a wrong call pass mypy and fail in another process. These tests compare
them: every Protocol method exists on its actor as a coroutine with the same parameters (names, kinds, defaults,
annotations) and return annotation, and every public coroutine method of the actor has its Protocol method.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import xoscar as xo

from xinference.core.model_actor import ModelActor
from xinference.core.refs import ReplicaRef, SupervisorRef, WorkerRef
from xinference.core.supervisor import SupervisorActor
from xinference.core.worker import WorkerActor

PAIRS = [(SupervisorRef, SupervisorActor), (WorkerRef, WorkerActor), (ReplicaRef, ModelActor)]
IDS = ["supervisor", "worker", "replica"]
#: what every xoscar actor has, which no caller reaches through a reference
ACTOR_BASICS = frozenset(dir(xo.StatelessActor))


def _protocol_methods(protocol: type) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(protocol).items()
        if inspect.isfunction(member) and not name.startswith("_")
    }


def _public_coroutines(actor: type) -> set[str]:
    return {
        name
        for name in dir(actor)
        if not name.startswith("_") and name not in ACTOR_BASICS and inspect.iscoroutinefunction(getattr(actor, name))
    }


def _shape(function: Any) -> tuple[list[tuple[str, Any, Any, Any]], Any]:
    signature = inspect.signature(function)
    parameters = [(p.name, p.kind, p.default, p.annotation) for p in signature.parameters.values()]
    return parameters, signature.return_annotation


@pytest.mark.parametrize(("protocol", "actor"), PAIRS, ids=IDS)
def test_every_method_of_a_reference_is_the_actors_own(protocol: type, actor: type) -> None:
    methods = _protocol_methods(protocol)
    assert methods, f"{protocol.__name__} declares no method"
    for name, declared in methods.items():
        real = getattr(actor, name, None)
        assert real is not None, f"{actor.__name__} has no {name}, which {protocol.__name__} declares"
        assert inspect.iscoroutinefunction(declared), f"{protocol.__name__}.{name} must be async, as a call is"
        assert inspect.iscoroutinefunction(real), f"{actor.__name__}.{name} is not a coroutine"
        assert _shape(declared) == _shape(real), f"{protocol.__name__}.{name} differs from {actor.__name__}'s"


@pytest.mark.parametrize(("protocol", "actor"), PAIRS, ids=IDS)
def test_every_public_method_of_an_actor_has_its_reference(protocol: type, actor: type) -> None:
    missing = _public_coroutines(actor) - set(_protocol_methods(protocol))
    assert not missing, f"{protocol.__name__} lacks {sorted(missing)}: add them so callers are type-checked"


def test_a_changed_parameter_is_noticed() -> None:
    """The comparison itself: one default changed on a copy of an actor method no longer matches."""

    class Drifted:
        async def terminate_replica(self, replica_uid: str, why: str = "stopped") -> None: ...

    assert _shape(Drifted.terminate_replica) != _shape(WorkerRef.terminate_replica)
    assert _shape(WorkerActor.terminate_replica) == _shape(WorkerRef.terminate_replica)
