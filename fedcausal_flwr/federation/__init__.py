"""Flower glue: the only package (with ``strategies/`` and ``clients/``) that imports flwr.

* :mod:`.messages` - Request / Reply / ClientInfo, wire keys, errors, SecAgg+ exact-sum bounds
  (Flower-free).
* :mod:`.bookkeeping` - round log, bytes, dropouts, privacy ledger (Flower-free).
* :mod:`.apps` - ServerApp/ClientApp builders and the round-until-done ``ProtocolWorkflow``.
* :mod:`.localgrid` - synchronous in-process ``Grid`` (no Ray).
* :mod:`.runners` - ``run_protocol`` / ``run_method`` on the in-process or Ray backend.
* :mod:`.registry` - method registry used by ``flwr run`` and the CLI.
* :mod:`.app` - module-level ``server_app`` / ``client_app`` for ``flwr run``.
* :mod:`.deploy` - SuperLink + SuperNodes on 127.0.0.1 for smoke tests and demos.
"""
