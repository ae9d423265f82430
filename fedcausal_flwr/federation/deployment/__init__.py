"""Deployment tooling: a federation of SuperLink and SuperNodes, on this machine or across sites.

* :mod:`.local_deployment` - SuperLink + one SuperNode per site + ``flwr run`` on 127.0.0.1.
* :mod:`.localhost` - ``fedcausal-flwr federation up | down | credentials``.
* :mod:`.credentials` - TLS certificates and SuperNode keys (the ``cryptography`` package).
* :mod:`.tuned_supernode` - ``fedcausal-supernode``: ``flower-supernode`` with shorter waits.
* :mod:`.warm_executor` - ``fedcausal-executor``: a warm ClientApp executor for a SuperNode.
"""
