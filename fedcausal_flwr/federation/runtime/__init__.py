"""The Flower runtime: the apps every method runs in, on every backend (the deployment's
module-level ``server_app`` / ``client_app`` for ``flwr run`` are :mod:`fedcausal_flwr.flwr_app`,
an entry point beside the command line and the Python API).

* :mod:`.workflow` - ServerApp/ClientApp builders, ``RunSettings`` and the round-until-done
  workflow (SecAgg+ rounds through Flower's ``SecAggPlusWorkflow``).
* :mod:`.clientside` - the ClientApp's mods and the builder of a ClientApp around a client
  factory.
* :mod:`.adapter` - a legacy Flower ``Strategy`` around a protocol run.
* :mod:`.envelope` - a plain round's request and reply as one record (the site's mod that opens
  it is in :mod:`.clientside`).
* :mod:`.localgrid` - synchronous in-process ``Grid`` (no Ray).
* :mod:`.runners` - ``run_protocol`` / ``run_method`` on the in-process or Ray backend.
* :mod:`.secagg_traffic` - what SecAgg+ itself sends, counted apart from the method's payload.
* :mod:`.flower_internals` - every Flower name outside its public API, with a version check.
"""
