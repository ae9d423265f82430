"""fedCI (Hahn et al.): PC or FCI on mixed data with a federated GLM likelihood-ratio CI test.

The server drives the batched PC/FCI engine of :mod:`fedcausal_flwr.discovery`. For each batch of
CI tests it fits the four GLMs of every test (x~S, x~y+S, y~S, y~x+S) by federated Newton/IRLS
(:mod:`fedcausal_flwr.stats.glm`): **one Flower round per IRLS iteration, all unfinished models of
all tests of the batch advancing in the same round**, so rounds grow with iterations, not with
tests x iterations. Every site must hold the same variables (in any order; the input check says
so and points to ``fedcdnv`` for non-identical variable sets): with ``site_effect="none"`` a
client lacking ``y`` would still answer the null model ``x ~ S`` but not ``x ~ y + S``, and the
likelihood ratio of models fitted on different rows is meaningless. The result records which
clients took part in each test.

Wire protocol (actions, payload records, replies, the fixed-point encoding and its precision):
:mod:`fedcausal_flwr.protocols.fedci`.

``encoding``: ``float`` sends the GLM blocks as float64, summed by the server in partition order;
``fixed`` (the default whenever the run is secure) sends them as fixed-point integer digits,
summed exactly (through SecAgg+ in a secure run). What the server learns: the schema, every
model's coefficients at every iteration (including fixed site coefficients for
``site_effect="fixed"``), the summed information matrices, scores, log-likelihoods, RSS and row
counts of each model.

``ci="fisher"`` (baseline, PC or FCI): each client runs the same symmetric LRT on its own rows
(action ``local_lrt``) and replies with its p-values (and the rows each used); the server
combines them by Fisher's method, one round per batch; it learns every local p-value (not
securely summable).

Missing values (``missing``): ``testwise`` counts each of a test's four GLMs over a client's rows
observed on x, y and S, so the summed fit equals the pooled fit on the complete rows;
``listwise`` makes each client drop its incomplete rows first.

``schema``: a :class:`~fedcausal_flwr.data.schema.Schema` JSON string. Without it, kinds come from
the hello dtypes (float -> continuous, bool -> binary, anything else categorical over the union of
levels); ordinal variables therefore need an explicit schema.
"""

from __future__ import annotations

from fedcausal_flwr.protocols.fedci import DISCLOSURES
from fedcausal_flwr.strategies.base import register_variants
from fedcausal_flwr.strategies.glm_tests import FEDCI_METHODS, secure_support

register_variants(
    {search: method.strategy for search, method in FEDCI_METHODS.items()},
    {search: (method.name, method.options) for search, method in FEDCI_METHODS.items()},
    {
        search: f"fedCI: {words} with a federated GLM likelihood-ratio test on mixed data"
        for search, words in (("pc", "PC-stable"), ("fci", "FCI"))
    },
    "fedcausal_flwr.clients.fedci:FedCIClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    secure=secure_support,
    paper="fedCI (Hahn et al.)",
    registered_by=__name__,
)
