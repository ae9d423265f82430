"""Every Flower name outside its public API that the project uses, in one place, for flwr 1.42.

Flower 1.42's public API is what ``flwr.app``, ``flwr.clientapp``, ``flwr.serverapp``,
``flwr.client``, ``flwr.client.mod``, ``flwr.common``, ``flwr.server``, ``flwr.server.strategy``,
``flwr.server.workflow`` and ``flwr.simulation`` export in ``__all__``. Everything else the
project needs is imported here, each with the public API it is missing, so a Flower upgrade is
checked in one module (and a test makes sure no other module reaches past the public API). Import
fails with a clear message on another Flower series: these names were checked against 1.42 only.
"""

from __future__ import annotations

import signal
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
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
    fitres_to_recorddict,
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
# record key secaggplus_mod itself looks for), and, for the sites' signed SecAgg+ (signed_secagg),
# the names of SecAgg+'s stages and of the entries of each stage's record (the keys a site
# advertises, the participants' lists, the masked vector), which no public module names either.
from flwr.common.secure_aggregation.secaggplus_constants import (  # noqa: E402
    RECORD_KEY_CONFIGS,
    RECORD_KEY_STATE,
)
from flwr.common.secure_aggregation.secaggplus_constants import Key as SecAggKey  # noqa: E402
from flwr.common.secure_aggregation.secaggplus_constants import Stage as SecAggStage  # noqa: E402


def secagg_sample_size(context: Any) -> int:
    """How many nodes take part in the SecAgg+ round a client is in (the ``sample_num`` its
    setup stage stored in the node's state; 0 before the setup stage)."""
    state = context.state.config_records.get(RECORD_KEY_STATE)
    return int(state.get("sample_num", 0)) if state is not None else 0


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

    def setup_stage(self, grid, context, state):
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


# -- Interrupting a Ray simulation. Missing public API: stopping `run_simulation` from outside.
# Its engine waits in `ThreadPoolExecutor.__exit__` for worker threads that stop only on an event
# set after that wait, so a KeyboardInterrupt in the main thread hangs it; and `ray.init` replaces
# the process's SIGTERM handler (`ray._private.utils.set_sigterm_handler`, called by `ray.init`
# and Ray's node start-up) with one that exits, and Ray's core worker prints a native stack dump on
# SIGTERM unless `RAY_DISABLE_FAILURE_SIGNAL_HANDLER` (read into `ray_constants` at import). A
# command that handles signals itself keeps its handler and asks, while this is running, to leave
# at once instead of unwinding (fedcausal_flwr.interrupts).
_RAY_SIMULATION = threading.Event()
_RAY_LEFTOVERS: list[str] = []


@contextmanager
def ray_simulation(leftovers: Sequence[str] = ()) -> Iterator[None]:
    """Mark a Ray simulation as running in this process; a SIGTERM handler installed before it
    (the command's own) stays in place, without Ray's native dump before it. ``leftovers``:
    folders the run removes when it ends, for a command that leaves at once to remove."""
    import ray._private.ray_constants as ray_constants
    import ray._private.utils as ray_utils

    own = signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN, None)
    original = ray_utils.set_sigterm_handler, ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER
    if own:
        ray_utils.set_sigterm_handler = lambda handler: None
        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
    _RAY_LEFTOVERS[:] = leftovers
    _RAY_SIMULATION.set()
    try:
        yield
    finally:
        _RAY_SIMULATION.clear()
        _RAY_LEFTOVERS.clear()
        ray_utils.set_sigterm_handler, ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = original


def ray_simulation_running() -> bool:
    """True inside :func:`ray_simulation`: unwinding the main thread would hang Flower's engine."""
    return _RAY_SIMULATION.is_set()


def ray_simulation_leftovers() -> list[str]:
    """The folders the running Ray simulation would remove when it ends (see above)."""
    return list(_RAY_LEFTOVERS)


# -- The SuperNode's ClientApp runtime and the SuperLink's ServerApp runtime in process isolation
#     (`flower-supernode --isolation process`, `flower-superlink --isolation process`), used by the
#     warm executor (fedcausal_flwr.federation.deployment.warm_executor). Missing public API: an
#     executor that runs app tasks in a process that is already started. Flower 1.42's SuperExec
#     starts a fresh `flwr-clientapp` / `flwr-serverapp` process per task (SubprocessExecutor; its
#     warm pools serve only agentapp/model/connector tasks on Kubernetes), and the pieces an
#     executor is made of (the Runtime API client, AcquireTask, the task runners `run_clientapp`
#     and `run_serverapp`) are internal. Imported inside the functions below: a module that only
#     needs the names above (every backend) does not pay for the SuperNode or SuperLink runtime.
SUPEREXEC_AUTH_METHODS = frozenset({"/flwr.proto.Runtime/AcquireTask"})  # as flower-superexec's


def add_superexec_auth_args(parser: Any) -> None:
    """``--superexec-auth-secret-file``, as ``flower-superexec`` / ``flower-supernode`` take it."""
    from flwr.supercore.auth import add_superexec_auth_secret_args

    add_superexec_auth_secret_args(parser)


def load_superexec_secret(path: str | None) -> bytes | None:
    from flwr.supercore.auth import load_superexec_auth_secret

    return load_superexec_auth_secret(secret_file=path)


def preload_app_runtime(app: str = "clientapp") -> None:
    """Import what ``flwr-clientapp`` (``app="clientapp"``) or ``flwr-serverapp``
    (``"serverapp"``) imports (the task runner and everything under it), and check it has what
    :func:`run_clientapp_task` / :func:`run_serverapp_task` use."""
    import importlib

    module_name, names = APP_RUNTIMES[app]
    runtime = importlib.import_module(module_name)
    missing = [name for name in names if not hasattr(runtime, name)]
    if missing:
        raise ImportError(
            f"flwr {flwr.__version__}: {module_name} has no {missing} "
            f"(the warm executor was written for flwr {FLOWER_SERIES}x)"
        )


class AppTaskSource:
    """Claims ClientApp tasks from a SuperNode's Runtime API (``app="clientapp"``) or ServerApp
    tasks from a SuperLink's (``"serverapp"``), as ``flower-superexec`` does (AcquireTask, with
    the version header and, given a secret, SuperExec auth)."""

    def __init__(
        self,
        runtime_api_address: str,
        insecure: bool,
        root_certificates_path: str | None = None,
        superexec_auth_secret: bytes | None = None,
        app: str = "clientapp",
    ):
        if app not in APP_RUNTIMES:
            raise ValueError(f"app must be one of {sorted(APP_RUNTIMES)}, not {app!r}")
        self.app = app
        from flwr.supercore.interceptors import (
            RuntimeVersionHttpInterceptor,
            SuperExecAuthHttpInterceptor,
        )
        from flwr.supercore.retry import make_simple_http_retry_invoker
        from flwr.supercore.runtime import RuntimeHttpClient
        from flwr.supercore.tls import validate_and_resolve_root_certificates

        interceptors: list[Any] = [RuntimeVersionHttpInterceptor(component_name="SuperExec")]
        if superexec_auth_secret:
            interceptors.append(
                SuperExecAuthHttpInterceptor(
                    master_secret=superexec_auth_secret,
                    protected_methods=SUPEREXEC_AUTH_METHODS,
                )
            )
        self.client = RuntimeHttpClient.from_server_address(
            server_address=runtime_api_address,
            insecure=insecure,
            root_certificates=validate_and_resolve_root_certificates(
                root_certificates_path, insecure
            ),
            interceptors=interceptors,
            retry_invoker=make_simple_http_retry_invoker(),
        )

    def acquire(self) -> tuple[str, int] | None:
        """``(token, task id)`` of a pending task of our app claimed for us, or None."""
        from flwr.proto.runtime_pb2 import AcquireTaskRequest  # pylint: disable=E0611
        from flwr.supercore.constant import TaskType

        task_type = TaskType.CLIENT_APP if self.app == "clientapp" else TaskType.SERVER_APP
        response = self.client.AcquireTask(
            AcquireTaskRequest(supported_task_types=[task_type], agentapp_fab_hashes=[])
        )
        if response.HasField("task") and response.token:
            return response.token, int(response.task.task_id)
        return None

    def close(self) -> None:
        self.client.close()


def run_clientapp_task(
    runtime_api_address: str,
    token: str,
    insecure: bool,
    root_certificates_path: str | None,
    parent_pid: int | None,
    pull_backoff: float,
    message_wait: float = 5.0,
    pinned_app: Any = None,
) -> int:
    """Run one claimed ClientApp task with Flower's own ``run_clientapp`` (what
    ``flwr-clientapp --token ...`` runs), in this process; its exit code. Runtime dependency
    installation is off.

    Two changes, in this (forked, single-task) process only, both for a worker that starts within
    milliseconds of its task (a fresh ``flwr-clientapp`` process takes a second to start, by which
    time the SuperNode has stored the message and its objects): Flower's ``pull_task_input`` waits
    up to ``message_wait`` seconds for the message (the SuperNode creates the task just before it
    stores the message) instead of failing at once, and retries the message's objects the
    SuperNode has not yet pulled from the SuperLink after ``pull_backoff`` seconds (doubling,
    capped at 0.1 s) instead of Flower's 1 s (doubling, capped at 10 s).

    ``pinned_app(fab_content, context)``: the ClientApp to run, chosen by the site, never loaded
    from the bundle: the bundle is then neither installed nor put on the import path (Flower's
    ``install_from_fab`` and ``get_load_client_app_fn``, both in the runtime module)."""
    from functools import partial

    import flwr.supernode.runtime.run_clientapp as runtime

    runtime.pull_and_inflate_object_from_tree = partial(
        runtime.pull_and_inflate_object_from_tree,
        initial_backoff=pull_backoff,
        backoff_cap=max(pull_backoff, 0.1),
    )
    flower_pull_task_input = runtime.pull_task_input

    pulled: dict[str, Any] = {}

    def patient_pull_task_input(client: Any) -> Any:
        client.PullMessages = _waiting(client.PullMessages, message_wait, pull_backoff)
        message, context, run, fab = flower_pull_task_input(client)
        pulled.update(context=context, fab=fab)
        return message, context, run, fab

    runtime.pull_task_input = patient_pull_task_input
    if pinned_app is not None:
        runtime.install_from_fab = lambda *args, **kwargs: None  # type: ignore[assignment]

        def load_pinned(**kwargs: Any) -> Any:
            return lambda *ids: pinned_app(pulled["fab"].content, pulled["context"])

        runtime.get_load_client_app_fn = load_pinned  # type: ignore[assignment]
    return _task_exit_code(
        runtime.run_clientapp,
        **_task_arguments(runtime_api_address, token, insecure, root_certificates_path, parent_pid),
    )


def _task_arguments(
    runtime_api_address: str,
    token: str,
    insecure: bool,
    root_certificates_path: str | None,
    parent_pid: int | None,
) -> dict[str, Any]:
    """What Flower's task runners (``run_clientapp``, ``run_serverapp``) take alike; runtime
    dependency installation off."""
    from flwr.supercore.tls import validate_and_resolve_root_certificates

    return {
        "runtime_api_address": runtime_api_address,
        "token": token,
        "insecure": insecure,
        "certificates": validate_and_resolve_root_certificates(root_certificates_path, insecure),
        "parent_pid": parent_pid,
        "runtime_dependency_install": False,
    }


def _task_exit_code(run: Callable[..., None], **arguments: Any) -> int:
    """``run(**arguments)``'s exit code: Flower's task runners end with ``flwr_exit``, which
    calls ``sys.exit``."""
    try:
        run(**arguments)
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 1
    return 0


def _waiting(pull_messages: Any, wait: float, step: float) -> Any:
    """``PullMessages`` asked again (every ``step`` s, up to ``wait`` s) while it returns none."""
    import time

    def pull(request: Any) -> Any:
        deadline = time.monotonic() + wait
        while not (response := pull_messages(request)).messages_list:
            if time.monotonic() >= deadline:
                break  # Flower's pull_task_input reports it
            time.sleep(min(step, 0.05))
        return response

    return pull


#: What the warm executor uses of the ClientApp runtime module (checked when it starts).
CLIENTAPP_RUNTIME_NAMES = (
    "run_clientapp",
    "pull_task_input",
    "pull_and_inflate_object_from_tree",
    "install_from_fab",
    "get_load_client_app_fn",
)


def run_serverapp_task(
    runtime_api_address: str,
    token: str,
    insecure: bool,
    root_certificates_path: str | None,
    parent_pid: int | None,
) -> int:
    """Run one claimed ServerApp task with Flower's own ``run_serverapp``, in this (forked,
    single-task) process, as ``flwr-serverapp --token ...`` runs it: its output mirrored to the
    run's log stream (what ``flwr run --stream`` shows); its exit code. Runtime dependency
    installation is off. Nothing else changes: the bundle's ServerApp is loaded as Flower loads
    it (the coordinator's own app); a fresh ``flwr-serverapp`` process spends about 2 s importing
    the whole SuperLink (its command module's) before it runs a line of the app."""
    from queue import Queue

    from flwr.supercore.logger import mirror_output_to_queue, restore_output
    from flwr.superlink.runtime.run_serverapp import run_serverapp

    log_queue: Queue[str | None] = Queue()
    mirror_output_to_queue(log_queue)
    try:
        return _task_exit_code(
            run_serverapp,
            log_queue=log_queue,
            **_task_arguments(
                runtime_api_address, token, insecure, root_certificates_path, parent_pid
            ),
        )
    finally:
        restore_output()


#: What the warm executor uses of the ServerApp runtime module (checked when it starts).
SERVERAPP_RUNTIME_NAMES = ("run_serverapp",)

#: The app tasks a warm executor runs: ``clientapp`` (a SuperNode's) or ``serverapp`` (a
#: SuperLink's), the Flower runtime module that runs one, and what of it is used here.
APP_RUNTIMES = {
    "clientapp": ("flwr.supernode.runtime.run_clientapp", CLIENTAPP_RUNTIME_NAMES),
    "serverapp": ("flwr.superlink.runtime.run_serverapp", SERVERAPP_RUNTIME_NAMES),
}


# -- The SuperNode's waits (tuned SuperNode, fedcausal_flwr.federation.deployment.tuned_supernode).
#     Missing public API: any setting for them. Flower 1.42's SuperNode loop
#     (flwr.supernode.start_client_internal) sleeps a hard-coded 3 s after a pull from the SuperLink
#     that brought no message, waits for the ClientApp's reply (and for its objects) in hard-coded
#     0.5 s steps, and pulls a message's objects from the SuperLink with Flower's default retry
#     backoff (1 s, doubling up to 10 s) when they are not there yet. tune_supernode_waits() gives
#     that one module its own `time`, whose sleep() turns those two durations into shorter ones, and
#     its own `pull_objects` with a shorter backoff; every other call, and every other module, is
#     untouched. Given `on_message`, it also wraps the loop's `_pull_and_store_message` to call it
#     once a pulled message is stored (the tuned SuperNode wakes its executor then). It refuses to
#     patch a module whose source does not have exactly those sleeps and calls.
SUPERNODE_LOOP_MODULE = "flwr.supernode.start_client_internal"
SUPERNODE_IDLE_SLEEP = 3  # seconds, after an empty pull
SUPERNODE_REPLY_SLEEP = 0.5  # seconds, between looks for the reply and for its objects
#: what the loop's source must contain, and how often (the version check of the patch)
SUPERNODE_LOOP_CALLS = {
    f"time.sleep({SUPERNODE_IDLE_SLEEP})": 1,
    f"time.sleep({SUPERNODE_REPLY_SLEEP})": 2,
    "time.sleep(": 3,
    "pull_objects(": 1,
    "initial_backoff": 0,
    "_pull_and_store_message(": 2,  # its definition, and the loop's one call
    "return run_id": 3,  # a stored message (or an error reply to it) for that run
}


class _TunedClock:
    """``time`` for one module, with some sleep durations replaced."""

    def __init__(self, waits: dict[float, float]):
        import time

        self._time = time
        self.waits = dict(waits)

    def sleep(self, seconds: float) -> None:
        self._time.sleep(self.waits.get(seconds, seconds))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._time, name)


def supernode_loop_mismatch(source: str) -> str | None:
    """Why the SuperNode loop ``source`` is not the one the tuning was written for (None: it is)."""
    found = {call: source.count(call) for call in SUPERNODE_LOOP_CALLS}
    if found == SUPERNODE_LOOP_CALLS:
        return None
    differ = ", ".join(
        f"{call!r} {found[call]}x (expected {n}x)"
        for call, n in SUPERNODE_LOOP_CALLS.items()
        if found[call] != n
    )
    return (
        f"{SUPERNODE_LOOP_MODULE} (flwr {flwr.__version__}) is not the SuperNode loop this tuning "
        f"was written for (flwr {FLOWER_SERIES}x): {differ}. Run the stock flower-supernode, or "
        "a fedcausal-flwr release made for this Flower"
    )


def tune_supernode_waits(
    idle_poll: float,
    reply_wait: float,
    object_backoff: float,
    on_message: Callable[[], None] | None = None,
) -> dict[str, float]:
    """Shorten the SuperNode loop's hard-coded waits (see above); {what: new seconds}. With
    ``on_message``, call it after each pull that stored a message (or a reply to it).
    :class:`ImportError` (with :func:`supernode_loop_mismatch`'s reason) on another loop."""
    import importlib
    import inspect
    from functools import partial

    loop = importlib.import_module(SUPERNODE_LOOP_MODULE)
    problem = supernode_loop_mismatch(inspect.getsource(loop))
    if problem:
        raise ImportError(problem)
    loop.time = _TunedClock(  # type: ignore[attr-defined]
        {float(SUPERNODE_IDLE_SLEEP): idle_poll, SUPERNODE_REPLY_SLEEP: reply_wait}
    )
    loop.pull_objects = partial(  # type: ignore[attr-defined]
        loop.pull_objects, initial_backoff=object_backoff, backoff_cap=max(object_backoff, 0.5)
    )
    if on_message is not None:
        pull_and_store = loop._pull_and_store_message

        def pull_store_and_tell(*args: Any, **kwargs: Any) -> int | None:
            run_id = pull_and_store(*args, **kwargs)
            if run_id is not None:
                on_message()
            return run_id

        loop._pull_and_store_message = pull_store_and_tell  # type: ignore[attr-defined]
    return {
        f"idle poll ({SUPERNODE_IDLE_SLEEP} s)": idle_poll,
        f"reply wait ({SUPERNODE_REPLY_SLEEP} s)": reply_wait,
        "object pull backoff (1 s)": object_backoff,
    }


# -- The ServerApp's reply pulls (a deployment's ServerApp, run by Flower's `flwr-serverapp`).
# Missing public API: the retry backoff of Flower's deployment Grid (HttpGrid, module
# flwr.superlink.grid.http_grid) for a reply whose objects are not at the SuperLink yet. A
# SuperNode stores its reply at the SuperLink first and pushes the reply's objects after it; a
# ServerApp that pulls in between (the project's looks for replies every 0.05 s) waits Flower's
# default backoff, 1 s (doubling up to 10 s), before it asks again. tune_grid_reply_pulls() gives
# that one module its own `pull_objects` with a shorter backoff, in the ServerApp's process only,
# and only if the module's source has exactly the one call it was written for.
GRID_MODULE = "flwr.superlink.grid.http_grid"
GRID_REPLY_BACKOFF = 0.02  # seconds (Flower: 1), doubling up to 0.5 s (Flower: 10)


def tune_grid_reply_pulls(grid: Any, initial_backoff: float = GRID_REPLY_BACKOFF) -> str | None:
    """Shorten ``grid``'s object-pull backoff if it is Flower's deployment Grid (see above); None
    if done (or not a deployment Grid), else why it was left as it is."""
    import importlib
    import inspect
    from functools import partial

    if type(grid).__module__ != GRID_MODULE:
        return None
    module = importlib.import_module(GRID_MODULE)
    if isinstance(module.pull_objects, partial):  # tuned already (one ServerApp per process)
        return None
    source = inspect.getsource(module)
    if source.count("pull_objects(") != 1 or "initial_backoff" in source:
        return (
            f"{GRID_MODULE} (flwr {flwr.__version__}) is not the Grid this tuning was written for "
            f"(flwr {FLOWER_SERIES}x); replies are pulled with Flower's own backoff"
        )
    module.pull_objects = partial(  # type: ignore[attr-defined]
        module.pull_objects, initial_backoff=initial_backoff, backoff_cap=max(initial_backoff, 0.5)
    )
    return None


def run_flower_supernode() -> None:
    """``flower-supernode``: Flower's own entry point (its arguments, TLS, auth, isolation)."""
    from flwr.supernode.cli import flower_supernode

    flower_supernode()


__all__ = [
    "CLIENT_APP_RAISED_EXCEPTION",
    "APP_RUNTIMES",
    "AppTaskSource",
    "CLIENTAPP_RUNTIME_NAMES",
    "FLOWER_SERIES",
    "GRID_MODULE",
    "GRID_REPLY_BACKOFF",
    "MAIN_CONFIGS_RECORD",
    "MAIN_PARAMS_RECORD",
    "RECORD_KEY_CONFIGS",
    "Key",
    "SecAggKey",
    "SecAggStage",
    "SUPEREXEC_AUTH_METHODS",
    "SUPERNODE_IDLE_SLEEP",
    "SUPERNODE_LOOP_CALLS",
    "SUPERNODE_LOOP_MODULE",
    "SUPERNODE_REPLY_SLEEP",
    "SERVERAPP_RUNTIME_NAMES",
    "TrackedSecAggPlusWorkflow",
    "add_superexec_auth_args",
    "client_app_error_reason",
    "empty_run",
    "fitins_to_recorddict",
    "fitres_to_recorddict",
    "load_superexec_secret",
    "preload_app_runtime",
    "recorddict_to_fitres",
    "run_clientapp_task",
    "run_serverapp_task",
    "run_flower_supernode",
    "run_simulation_quietly",
    "secagg_sample_size",
    "set_message_routing",
    "set_task_identity",
    "start_update_client_manager_thread",
    "supernode_loop_mismatch",
    "tune_grid_reply_pulls",
    "tune_supernode_waits",
]
