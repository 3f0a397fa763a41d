"""The launch fields are defined once (``core/launch.py``) and the API protocol, the supervisor and the CLI
all follow that definition."""

from __future__ import annotations

from dataclasses import fields

from xinference.api.admin.models.protocol import LaunchModelRequest
from xinference.core.launch import CLI_OPTION_FIELDS, LAUNCH_FIELDS, LaunchRequest
from xinference.core.supervisor.records import LaunchRequest as RecordsLaunchRequest


def test_the_field_lists_derive_from_the_dataclass() -> None:
    assert RecordsLaunchRequest is LaunchRequest
    assert LAUNCH_FIELDS == tuple(f.name for f in fields(LaunchRequest) if f.name != "engine_kwargs")
    assert CLI_OPTION_FIELDS < set(LAUNCH_FIELDS)
    assert {"model_name", "n_gpu", "replica", "model_path", "download_hub"} <= CLI_OPTION_FIELDS
    assert not {"keep_alive", "autostart", "worker_ip", "ignore_memory_check"} & CLI_OPTION_FIELDS


def test_the_api_request_declares_every_launch_field_and_hands_over_exactly_them() -> None:
    assert set(LAUNCH_FIELDS) <= set(LaunchModelRequest.model_fields)
    request = LaunchModelRequest.model_validate(
        {"model_name": "m", "n_ctx": 4096, "keep_alive": "5m", "worker_ip": "", "n_worker": None}
    )
    launch = request.to_launch()
    assert set(launch) == {*LAUNCH_FIELDS, "engine_kwargs"}
    assert launch["engine_kwargs"] == {"n_ctx": 4096} and launch["worker_ip"] is None
    parsed = LaunchRequest(**launch)
    assert parsed.keep_alive == "5m" and parsed.n_gpu == "auto"


def test_the_cli_refuses_exactly_the_fields_it_sets_itself() -> None:
    from xinference.cli.launch import _LAUNCH_FIELDS

    assert _LAUNCH_FIELDS is CLI_OPTION_FIELDS
