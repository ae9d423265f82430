"""Every Flower name outside its public API that the project uses, in one place, for flwr 1.42.

Flower 1.42's public API is what ``flwr.app``, ``flwr.clientapp``, ``flwr.serverapp``,
``flwr.client``, ``flwr.client.mod``, ``flwr.common``, ``flwr.server``, ``flwr.server.strategy``,
``flwr.server.workflow`` and ``flwr.simulation`` export in ``__all__``. Everything else the
project needs is imported here, each with the public API it is missing, so a Flower upgrade is
checked in one module (and a test makes sure no other module reaches past the public API). Import
fails with a clear message on another Flower series: these names were checked against 1.42 only.
"""

from __future__ import annotations

import warnings
from typing import Any

import flwr

FLOWER_SERIES = "1.42."

if not flwr.__version__.startswith(FLOWER_SERIES):  # pragma: no cover - depends on the install
    raise ImportError(
        f"fedcausal-flwr uses Flower internals checked against flwr {FLOWER_SERIES}x, but flwr "
        f"{flwr.__version__} is installed; install 'flwr[simulation]>=1.42,<1.43'"
    )

# isort: off
# (each import stays beside the note saying which public API it stands in for)

# -- Driving a legacy Strategy (the only route to SecAgg+ in 1.42) from a Message-API ServerApp.
# Missing public API: converting legacy FitIns/FitRes to and from Message records, which
# DefaultWorkflow does internally with these functions.
from flwr.compat.common.recorddict_compat import (  # noqa: E402
    fitins_to_recorddict,
    recorddict_to_fitres,
)

# Missing public API: keeping the legacy ClientManager in step with the Grid's nodes
# (DefaultWorkflow starts this thread internally; a custom workflow has to start it itself).
from flwr.server.compat.app_utils import start_update_client_manager_thread  # noqa: E402

# Missing public API: the LegacyContext.state keys SecAggPlusWorkflow reads (the global
# parameters record, the config record with the start time and the current round).
from flwr.server.workflow.constant import (  # noqa: E402
    MAIN_CONFIGS_RECORD,
    MAIN_PARAMS_RECORD,
    Key,
)

# Missing public API: telling SecAgg+ stage messages apart from plain ones in a client mod (the
# record key secaggplus_mod itself looks for).
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS  # noqa: E402

# -- The synchronous in-process Grid (LocalGrid). Missing public API: an in-process Grid at all
# (1.42's simulation engine is Ray-only), so LocalGrid implements the public Grid interface and
# needs: the process-global TaskIdentity that server-side Message construction reads, an empty
# Run record, the error code Flower uses for a ClientApp exception, and message ids / source
# node ids, which only the runtime sets (private Metadata fields).
from flwr.common.constant import ErrorCode  # noqa: E402
from flwr.supercore.run import Run  # noqa: E402
from flwr.supercore.task_identity import TaskIdentity  # noqa: E402

# Public; subclassed below to read its state (see TrackedSecAggPlusWorkflow).
from flwr.server.workflow import SecAggPlusWorkflow  # noqa: E402

# isort: on

CLIENT_APP_RAISED_EXCEPTION = ErrorCode.CLIENT_APP_RAISED_EXCEPTION


def set_task_identity(run_id: int, node_id: int, task_id: int = 1) -> None:
    """What Flower's runtime sets before a ServerApp builds messages (LocalGrid does it)."""
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, node_id, task_id


def empty_run(run_id: int) -> Run:
    return Run.create_empty(run_id)


def set_message_routing(metadata: Any, message_id: str, src_node_id: int | None = None) -> None:
    """Set the message id (and the source node) that only Flower's runtime sets."""
    metadata.__dict__["_message_id"] = message_id
    if src_node_id is not None:
        metadata.__dict__["_src_node_id"] = src_node_id


def client_app_error_reason(error: BaseException) -> str:
    """The reason text Flower's runtime gives a ClientApp exception (LocalGrid mimics it, so a
    client's ProtocolError reads the same on every backend)."""
    return f"{type(error)}:<'{error}'>"


class TrackedSecAggPlusWorkflow(SecAggPlusWorkflow):
    """SecAgg+ that keeps its last state. Missing public API: which nodes a halted SecAgg+ round
    dropped (the workflow logs it but returns nothing), needed to re-issue the step to the rest."""

    last_state: Any = None

    def setup_stage(self, grid, context, state):  # noqa: D102
        self.last_state = state
        return super().setup_stage(grid, context, state)


# -- The Ray backend. Flower's supported simulation entry point in 1.42 is `flwr run` against a
# simulation SuperLink. It does not keep what backend="ray" promises: it runs the ServerApp in
# another process (no strategy object comes back, only files), passes only TOML scalars to the
# apps (no in-memory client frames or client factories), needs a SuperLink process per run and
# installs nothing offline only if told. The project's app supports that path for users (`flwr
# run .`, tested); `backend="ray"` keeps `run_simulation`, deprecated in 1.42 but fully
# functional, and silences only its deprecation warning.
def run_simulation_quietly(**kwargs: Any) -> None:
    """``flwr.simulation.run_simulation`` without its 1.42 deprecation banner."""
    from flwr.simulation import run_simulation

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        run_simulation(**kwargs)


__all__ = [
    "CLIENT_APP_RAISED_EXCEPTION",
    "FLOWER_SERIES",
    "MAIN_CONFIGS_RECORD",
    "MAIN_PARAMS_RECORD",
    "RECORD_KEY_CONFIGS",
    "Key",
    "TrackedSecAggPlusWorkflow",
    "client_app_error_reason",
    "empty_run",
    "fitins_to_recorddict",
    "recorddict_to_fitres",
    "run_simulation_quietly",
    "set_message_routing",
    "set_task_identity",
    "start_update_client_manager_thread",
]
