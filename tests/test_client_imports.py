"""A message for method X imports only what X needs.

A deployment's ClientApp process (``flwr-clientapp``, one per message unless a warm executor forks
it) pays for every module it imports. Handling a FedPC message must import FedPC's own modules
(its client, and its strategy module, which declares its options) and the shared core, but no
other method's strategy or client module, none of the server side (the ServerApp workflow, the
Flower adapter, the runners, the API and CLI), and not scipy (a client counting tables needs no
p-value), networkx or pgmpy (checking the run config's network name needs neither). Checked in a
fresh interpreter, which handles a real ``hello`` and ``tables`` message through the app's
``client_app`` exactly as ``flwr-clientapp`` would call it.
"""

from __future__ import annotations

import json
import subprocess
import sys

from fedcausal_flwr.federation.deployment.warm_executor import builtin_method_modules

HANDLE_FEDPC_MESSAGES = r"""
import json, sys
import numpy as np
from flwr.app import Context, Message, RecordDict
from flwr.common import ndarrays_to_parameters
from flwr.common.typing import FitIns

from fedcausal_flwr.flwr_app import DEFAULT_RUN_CONFIG, client_app
from fedcausal_flwr.federation.runtime.flower_internals import (
    fitins_to_recorddict, set_task_identity,
)

csv_path = sys.argv[1]
set_task_identity(1, 0)
context = Context(1, 1, {"partition-id": 0, "data-path": csv_path,
                                 "allow-plain-statistics": True}, RecordDict(),
                  {**DEFAULT_RUN_CONFIG, "method": "fedpc"})
levels = {"a": [0, 1], "b": [0, 1, 2]}
requests = [
    ("hello", {}, []),
    ("tables", {"variables": ["a", "b"], "levels": levels}, [np.array([[0, 1]], dtype=np.int64)]),
]
replies = []
for step, (action, payload, arrays) in enumerate(requests, start=1):
    config = {"action": action, "payload": json.dumps(payload), "round": step, "secure": False,
              "secure_bound": 0}
    ins = FitIns(ndarrays_to_parameters(arrays), config)
    message = Message(fitins_to_recorddict(ins, True), dst_node_id=1, message_type="train")
    reply = client_app(message, context)
    replies.append(reply.error.reason if reply.has_error() else "ok")
print(json.dumps({"replies": replies, "modules": sorted(sys.modules)}))
"""

#: the server side and the user-facing entry points: nothing a ClientApp answering a message needs
SERVER_SIDE = (
    "fedcausal_flwr.federation.runtime.workflow",
    "fedcausal_flwr.federation.runtime.adapter",
    "fedcausal_flwr.federation.runtime.runners",
    "fedcausal_flwr.federation.runtime.localgrid",
    "fedcausal_flwr.federation.deployment.local_deployment",
    "fedcausal_flwr.federation.deployment.warm_executor",
    "fedcausal_flwr.federation.deployment.tuned_supernode",
    "fedcausal_flwr.api",
    "fedcausal_flwr.cli",
    "fedcausal_flwr.compare",
    "fedcausal_flwr.plots",
    "fedcausal_flwr.scoring",
    "fedcausal_flwr.experiments_registry",
)
FEDPC_OWN = {
    "fedcausal_flwr.strategies.fedpc",
    "fedcausal_flwr.clients.base",
    "fedcausal_flwr.clients.fedpc",
}


def test_a_fedpc_message_imports_only_fedpcs_modules(tmp_path):
    csv = tmp_path / "site0.csv"
    csv.write_text("a,b\n" + "".join(f"{i % 2},{i % 3}\n" for i in range(60)))
    done = subprocess.run(
        [sys.executable, "-c", HANDLE_FEDPC_MESSAGES, str(csv)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["replies"] == ["ok", "ok"], report["replies"]
    modules = set(report["modules"])
    # it really ran FedPC's client ...
    assert FEDPC_OWN <= modules
    # ... and nothing of another method, of the server side, or of the heavy libraries
    others = sorted(set(builtin_method_modules()) - FEDPC_OWN)
    assert len(others) >= 10  # the registry lists every method's modules
    loaded = [m for m in [*others, *SERVER_SIDE, "scipy", "networkx", "pgmpy"] if m in modules]
    assert not loaded, f"a FedPC message imported {loaded}"
