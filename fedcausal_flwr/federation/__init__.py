"""The protocol core (Flower-free) and the Flower glue around it.

Flower-free (unit-tested without Flower; ``tests/test_architecture.py`` checks it):

* :mod:`.protocol` - ``ProtocolStrategy`` (what a method implements) and ``ProtocolRun`` (the
  state machine driving it: hello, rounds, dropouts, result).
* :mod:`.membership` - node ids <-> partition ids, clients alive, hello reports, dropouts.
* :mod:`.sums` - exact integer sums, plain or decoded from SecAgg+'s mean.
* :mod:`.bookkeeping` - round log, bytes, dropouts, privacy ledger.
* :mod:`.messages` - Request / Reply / ClientInfo, wire keys, errors, SecAgg+ exact-sum bounds.
* :mod:`.registry` - methods, their declared options, disclosures and hooks.
* :mod:`.disclosure` - the four classes of what a client action discloses.
* :mod:`.site_policy` - a site's policy, the guard every reply passes, the site's audit log.
* :mod:`.coordinator` - the folders a coordinator reads and writes (result-path, truth, plugins).

Flower:

* :mod:`.adapter` - a legacy Flower ``Strategy`` around a protocol run.
* :mod:`.apps` - ServerApp/ClientApp builders, ``RunSettings`` and the round-until-done workflow.
* :mod:`.localgrid` - synchronous in-process ``Grid`` (no Ray).
* :mod:`.runners` - ``run_protocol`` / ``run_method`` on the in-process or Ray backend.
* :mod:`.app` - module-level ``server_app`` / ``client_app`` for ``flwr run``.
* :mod:`.deploy` - SuperLink + SuperNodes on 127.0.0.1 for smoke tests and demos.
* :mod:`.flower_internals` - every Flower name outside its public API, with a version check.
"""
