"""What a strategy and its client both need: action names, payload codecs, fixed-point scales.

One module per method family; each module's docstring documents its wire protocol (actions, payload
records and their keys, replies, what is summed and when each travels). Clients import these
modules, never a strategy, so the server and client sides of a method share one definition of every
action name and encoding. The records' machinery (:class:`~fedcausal_flwr.payload.Payload`),
the core's own actions (``hello``, ``bootstrap``: :mod:`fedcausal_flwr.federation.core.records`)
and the privacy charge (:mod:`fedcausal_flwr.privacy.charges`) sit below; none of them imports
this package.

Flower-free: this package imports only numpy, the standard library and the core packages
(``stats``, ``discovery``, ``graphs``, ``data``, ``federation.core``).
"""
