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

Wire protocol (after ``hello``):

========  =====================================================  ==============================
action    payload + arrays                                       reply (not summed by SecAgg)
========  =====================================================  ==============================
``glm``   ``schema`` (JSON), ``missing``, ``models``: rows       float64: the packed blocks of
          ``[response, predictors, site_effect, sites, rows]``;  every model, concatenated
          array 0: the models' coefficient vectors, concatenated ``[obj, ll, rss, n, Hb+g, H]``
========  =====================================================  ==============================

With ``encoding="float"`` the server sums the float64 replies in partition order. With
``encoding="fixed"`` (the default whenever the run is secure) the ``glm`` request is a secure
(summed) request and the payload also carries ``fixed = [f, b, L]``: every client rounds each float
``v`` to the integer ``q = round(v * 2**f)`` and sends it as ``L`` balanced base-``2**b`` digits
(``q = sum_j d_j 2**(b j)``, ``|d_j| <= 2**(b-1) <= C``), digit-major, as one int64 vector. ``b``
is the largest width whose digits respect the runtime's exact-sum bound ``C`` (``n * 2C < 2**32``),
so SecAgg+ sums every digit exactly and the server rebuilds ``sum_k q_k`` (float64, Horner) and
divides by ``2**f``. Precision lost: at most ``n_clients * 2**-(f+1)`` absolute per summed entry
(defaults ``f = 30``: < 5e-10 per client) plus float64 rounding; a value with
``|v| >= 2**(b L - 1 - f)`` cannot be encoded and the client fails with a clear error naming the
model (raise ``fixed_limbs``). What the server learns: the schema, every model's
coefficients at every iteration (including fixed site coefficients for ``site_effect="fixed"``),
the summed information matrices, scores, log-likelihoods, RSS and row counts of each model.

``ci="fisher"`` (baseline, PC or FCI): the ``local_lrt`` action with payload ``schema``,
``tests`` (rows ``[x, y, S]``), ``ridge``, ``missing``, ``tol``, ``max_iter``; each client runs
the same symmetric LRT on its own rows and replies with one float64 vector of p-values (nan where
it lacks a variable). The server combines them by Fisher's method, one round per batch; it learns
every local p-value (not securely summable).

Missing values (``missing``, carried by every ``glm`` and ``local_lrt`` request; iod-pooled's
``raw_rows`` carries only the schema): ``testwise`` gives each model the test's variables as
``rows`` (the fifth field of a model row), so a client counts a test's four GLMs over its rows
observed on x, y and S, and the summed fit equals the pooled fit on the complete rows;
``listwise`` makes each client drop its incomplete rows first.

``schema``: a :class:`~fedcausal_flwr.data.schema.Schema` JSON string. Without it, kinds come from
the hello dtypes (float -> continuous, bool -> binary, anything else categorical over the union of
levels); ordinal variables therefore need an explicit schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.options import documented_by
from fedcausal_flwr.protocols.fedci import DISCLOSURES
from fedcausal_flwr.strategies.glm_tests import (
    FEDCI_FCI_OPTIONS,
    FEDCI_PC_OPTIONS,
    FedCIStrategy,
    secure_support,
)


class FedCIPCStrategy(FedCIStrategy):
    """fedCI-PC: PC-stable with fedCI's federated GLM tests (FCI: :class:`FedCIFCIStrategy`)."""

    name = "fedci-pc"
    algorithm = "pc"
    OPTIONS = FEDCI_PC_OPTIONS


class FedCIFCIStrategy(FedCIPCStrategy):
    """fedCI-FCI: FCI with fedCI-PC's federated GLM tests (PAG output)."""

    name = "fedci-fci"
    algorithm = "fci"
    OPTIONS = FEDCI_FCI_OPTIONS


#: algorithm -> its method's strategy
STRATEGIES: dict[str, type[FedCIStrategy]] = {"pc": FedCIPCStrategy, "fci": FedCIFCIStrategy}


@documented_by(FEDCI_PC_OPTIONS)
def make_strategy(options: Mapping[str, Any], algorithm: str = "pc") -> FedCIStrategy:
    """fedCI-PC / fedCI-FCI from its options (raw keywords work too)."""
    return STRATEGIES[algorithm](options)


for _strategy in STRATEGIES.values():
    register_method(
        _strategy.name,
        _strategy,
        "fedcausal_flwr.clients.fedci:FedCIClient",
        disclosures=DISCLOSURES,
        bootstrap=True,
        secure=secure_support,
        paper="fedCI (Hahn et al.)",
        description=f"fedCI: {'PC-stable' if _strategy.algorithm == 'pc' else 'FCI'} with a "
        "federated GLM likelihood-ratio test on mixed data",
    )
