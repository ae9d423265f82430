"""FedC2SL (FedPC / FedFCI): PC or FCI on the server, every CI test answered from summed statistics.

Wang et al., "Towards Practical Federated Causal Structure Learning". The server runs the batched
PC-stable or FCI engine of :mod:`fedcausal_flwr.discovery`; each batch of CI tests (a whole PC
level, a Possible-D-Sep subset size, an R4 step) becomes one protocol step.

CI modes (``ci``):

* ``exact``: clients send the contingency tables of all tests of the batch; the server sums them
  and runs G2 or Pearson chi2. Identical to the pooled test (causal-learn's conventions).
* ``sketch``: the paper's protocol, batched: (1) summed stratum margins ``n_xz``, ``n_yz``; the
  server computes expected counts ``E`` and broadcasts them with a projection seed; (2) summed
  projected residuals ``P (T_k - E/K) / sqrt(E)`` (fixed point, 8 fractional bits); Li's
  geometric-mean estimator per stratum gives the chi2 statistic. Two rounds per batch.
* Gaussian data (``test="fisherz"``): one round of summed moments ``n, sum x, sum x x^T``; every
  Fisher-z test then runs on the server (exact mode only: SecAgg+ sums 32-bit integers).

A secure run (the run setting ``secure``: ``--secure``) sums the tables, margins and sketches
through Flower's SecAgg+ (exact integer sums). Mixed data: the methods ``fedci-pc`` /
``fedci-fci`` (:mod:`fedcausal_flwr.strategies.fedci`).

Wire protocol (actions, payload records, replies, what travels when):
:mod:`fedcausal_flwr.protocols.fedpc`.

Missing values (``missing``): ``testwise`` makes each summed test equal the pooled test with
test-wise deletion (each table, or each Fisher-z test's moments, over the rows complete on the
test's variables); ``listwise`` makes each client drop its incomplete rows first.

The method is one :class:`~fedcausal_flwr.strategies.search.SearchStrategy` over the federated
CI test its options choose (:func:`fedpc_tests`): :class:`~.table_tests.TableTests` (exact),
:class:`~.table_tests.SketchTests` (sketch) or :class:`~.moment_tests.MomentTests` (Fisher-z);
each plans, asks and tests its batches (how exact batches travel, dense, sparse or in parts:
:mod:`fedcausal_flwr.strategies.table_tests`). A client that cannot count a batch refuses it
with the cause (the run stops), it does not drop out.

``empty_strata_add_dof=True`` reproduces the FedC2SL code's degrees of freedom (+1 for every empty
stratum of a table: ``_CalculatePValue`` in the authors' ``alg/fed_cit.py``; the paper's formula,
Sec. 4.2, is silent on empty strata: docs/choices.md, FedC2SL); the default is causal-learn's
correct count.

What the server learns (see the ledger of each result): summed tables (exact/secure), each
client's nonzero table cells for a sparse batch (exact, never secure: a plain run's server adds the
clients' dense tables itself, so it sees them too), summed margins and sketches (sketch), or the
pooled covariance (Gaussian). With ``l >= |X||Y|`` the sketch can be
inverted by the server, which knows the projection (the paper's Sec. 4.2 claims the projection
hides the table "under appropriate parameters"; its l = 50, Supplementary Sec. 7.4, is not such a
setting: docs/choices.md, FedC2SL). A client that drops out mid-run is removed; a sketch batch
then restarts from its margins so every sum in one test comes from the same clients.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedcausal_flwr.options import Option, OptionSet
from fedcausal_flwr.protocols.fedpc import DISCLOSURES
from fedcausal_flwr.stats.contingency import DEFAULT_MAX_CELLS
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import Options, register_variants
from fedcausal_flwr.strategies.ci_tests import FederatedCITest
from fedcausal_flwr.strategies.moment_tests import MomentTests
from fedcausal_flwr.strategies.search import SearchMethod
from fedcausal_flwr.strategies.table_tests import DEFAULT_MAX_SERVER_CELLS, SketchTests, TableTests

CI_MODES = ("exact", "sketch")


def _options(algorithm: str) -> OptionSet:
    """FedPC's (``pc``) or FedFCI's (``fci``) declared options."""
    engine = shared.search_engine(algorithm)
    return OptionSet(
        (
            Option(
                "ci",
                "str",
                "exact",
                "how a CI test is answered: contingency tables summed over clients (exactly the "
                "pooled test), or the paper's random-projection sketch",
                choices=CI_MODES,
                paper="sketch (the paper's protocol)",
                why="summed tables give exactly the pooled test (the sketch approximates it, and "
                "the server can invert it when l >= |X||Y|); ci=sketch runs the paper's protocol",
            ),
            shared.test("chi2", ("chi2", "g2", "fisherz"), paper="chi2"),
            shared.alpha(0.05, paper="0.05"),
            shared.max_depth(),
            Option(
                "sketch_length",
                "int",
                50,
                "length l of each stratum's random projection",
                minimum=2,
                requires=("ci", ("sketch",)),
                paper="50",
            ),
            shared.seed("seed of the sketch's projections"),
            shared.empty_strata_add_dof(
                requires=("test", ("chi2", "g2")),
                paper="true in the authors' code (not stated in the paper)",
                why="causal-learn's count is the textbook one and keeps FedPC equal to pooled PC",
            ),
            Option(
                "max_cells",
                "int",
                DEFAULT_MAX_CELLS,
                "memory budget: cells of all contingency tables of one round (each client "
                "holds them at once; 8 bytes each); a depth over it is refused before a client "
                "counts it",
                minimum=1,
            ),
            Option(
                "max_server_cells",
                "int",
                DEFAULT_MAX_SERVER_CELLS,
                "memory budget of the server: cells of the clients' tables it holds in one "
                "round (all clients' replies together, 8 bytes a cell); a depth over it travels "
                "in several rounds (many clients: 1,000 clients x max_cells would not fit)",
                minimum=1,
            ),
            shared.missing(),
            *engine,
            *shared.dp_options(),
        ),
        checks=(
            shared.fisherz_needs_exact,
            shared.sketch_needs_chi2,
            shared.search_engine_problem,
            shared.dp_needs_exact_tables,
        ),
    )


FEDPC_OPTIONS = _options("pc")
FEDFCI_OPTIONS = _options("fci")


def fedpc_tests(options: Options) -> FederatedCITest:
    """FedC2SL's federated CI test, as the options choose it: Fisher-z on summed moments,
    exact summed tables, or the paper's sketch."""
    if options.test == "fisherz":
        return MomentTests(options)
    return TableTests(options) if options.ci == "exact" else SketchTests(options)


#: the search -> the method it makes
METHODS = {
    "pc": SearchMethod("fedpc", FEDPC_OPTIONS, "pc", fedpc_tests),
    "fci": SearchMethod("fedfci", FEDFCI_OPTIONS, "fci", fedpc_tests),
}


def secure_support(options: Mapping[str, Any]) -> str | None:
    """Tables, margins and sketches are integer sums; the Gaussian moments are floats."""
    if options.get("test") == "fisherz":
        return (
            "the Fisher-z test sums float moments, which SecAgg+ (32-bit integer sums) cannot carry"
        )
    return None


#: the search -> what its method's listing says
DESCRIPTIONS = {
    "pc": "FedC2SL's FedPC: PC-stable with a federated chi2/G2 test (exact summed tables or the "
    "sketch) or Fisher-z on summed moments",
    "fci": "FedC2SL's FedFCI: FCI with the same federated tests (PAG output)",
}
register_variants(
    {search: method.strategy for search, method in METHODS.items()},
    {search: (method.name, method.options) for search, method in METHODS.items()},
    DESCRIPTIONS,
    "fedcausal_flwr.clients.fedpc:FedPCClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    secure=secure_support,
    paper="FedC2SL (Wang et al.)",
    registered_by=__name__,
)
