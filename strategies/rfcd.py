"""RFCD (Mian et al., regret-based federated causal discovery) as the FedC2SL paper runs it.

The FedC2SL paper (Wang et al., Sec. 5.1 and Appendix 7.4) compares against RFCD "concretized
with the GES algorithm with the BDeu score"; its code (github.com/wangzhaoyu07/FedC2SL,
``alg/fed_GES.py`` and ``alg/FedLocalScoreFunctionClass.py``) is causal-learn's GES in which each
family score is the **worst client's** local BDeu score (this module follows that code, not an
implementation by Mian et al.). Here the server runs GES
(:func:`~fedcausal_flwr.discovery.ges.ges_steps`, Chickering's Insert/Delete over CPDAGs, in
causal-learn 0.1.4.8's operator order and tie-breaking); every step whose operators need families
not scored yet costs one round, in which each client returns its local BDeu score of every
such family (:class:`~fedcausal_flwr.discovery.ges.CausalLearnBDeu`, i.e. causal-learn's
``local_score_BDeu``). With one client the result is causal-learn's
``ges(X, score_func="local_score_BDeu")`` (same CPDAG; ``max_parents_fraction=none``, or
causal-learn's ``maxP`` set to the same cap). The result is a CPDAG.

**Aggregate and the code's ``r = 0`` start.** The code's GES minimises, and its causal-learn
(0.1.2.8) returned BDeu as a cost (the negated log score); its family score is
``r = 0; for each client: r = max(r, cost)``, the largest cost, i.e. the worst client. In
causal-learn 0.1.4.8 the BDeu score is the log score and GES maximises it, so the same worst case
is the **smallest** client log score, which is what is used here: ``min_k s_k(family)``,
started from the first client's value (an empty aggregate is impossible: every alive client
answers every batch). The ``0`` start is not kept: with costs it never binds (a BDeu cost is
>= 0), but with today's signs ``max(0, s_k)`` would be 0 for every family and GES would stop at
the empty graph. The code also draws, per family, ``K`` clients *with replacement*
(``np.random.choice`` without ``replace=False``, even at dropout rate 0), so each family is
scored by a random subset of about ``1 - (1 - 1/K)^K`` (65% at K = 10) of the clients; here every
alive client scores every family.

Defaults (the paper gives none; its code calls causal-learn with ``parameters=None``):
``ess = 1`` and ``structure_prior = 1`` (causal-learn's ``sample_prior`` and ``structure_prior``:
each of the other ``p - 1`` variables is a parent with probability ``1 / (p - 1)``), each
client's own **observed** number of values per variable (causal-learn's ``r_i_map``;
``cardinalities="global"`` uses the federation's level sets instead), and the code's
``maxP = p / 2`` (``max_parents_fraction = 0.5``): an insertion into a node is tried only while
it has at most ``p / 2`` directed parents in the CPDAG (causal-learn's own default is no cap).

**Dropouts.** The server keeps every client's score of every family. When clients drop out, GES
restarts from the empty graph over the survivors' stored scores (no round is spent on families
they already scored), so the result is RFCD over the survivors, as if they had been the only
clients (``Result.dropped_clients`` records the dropouts).

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.rfcd`.

What the server learns: every client's local BDeu score of every family GES visits (the
"individual graph fitness" the FedC2SL paper, Sec. 3.2, names as RFCD's leak): a function of
the client's counts of each family's configurations, and of its sample size. Not summable: a
worst case (a minimum) over clients cannot go through secure aggregation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.discovery.driver import StepRunner
from fedcausal_flwr.discovery.ges import Family, GESResult, ges_steps
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientInfo, ClientProtocolError, Reply, Request
from fedcausal_flwr.federation.core.registry import register_method
from fedcausal_flwr.options import Option, OptionSet, spell
from fedcausal_flwr.protocols.rfcd import (
    CARDINALITIES,
    DISCLOSURES,
    FAMILY_SCORES,
    FamilyScoresRequest,
    decode_families,
    encode_families,
)
from fedcausal_flwr.strategies.base import MethodStrategy, option_attributes

RFCD_OPTIONS = OptionSet(
    (
        Option(
            "ess",
            "float",
            1.0,
            "BDeu equivalent sample size (causal-learn's sample_prior)",
            minimum=0.0,
            min_exclusive=True,
            paper="not stated; 1 in the code (causal-learn's default)",
        ),
        Option(
            "structure_prior",
            "float",
            1.0,
            "expected number of parents of causal-learn's BDeu structure prior: each other "
            "variable is a parent with probability structure_prior / (p - 1); must be below p - 1",
            minimum=0.0,
            min_exclusive=True,
            nullable=True,
            null_meaning="no structure term",
            paper="not stated; 1 in the code (causal-learn's default)",
        ),
        Option(
            "max_parents_fraction",
            "float",
            0.5,
            "GES tries an insertion into a node only while it has at most this fraction of the "
            "p variables as directed parents (causal-learn's maxP = fraction * p)",
            minimum=0.0,
            nullable=True,
            null_meaning="no cap, causal-learn's default",
            paper="not stated; maxP = p / 2 in the code",
        ),
        Option(
            "cardinalities",
            "str",
            "observed",
            "numbers of values in each client's BDeu: the client's own observed values "
            "(causal-learn's) or the federation's level sets",
            choices=CARDINALITIES,
            paper="not stated; observed in the code (causal-learn's r_i_map)",
        ),
    )
)


class RFCDStrategy(MethodStrategy):
    """RFCD's server; see the module docstring for the rules (the wire protocol:
    :mod:`fedcausal_flwr.protocols.rfcd`)."""

    name = "rfcd"
    OPTIONS = RFCD_OPTIONS
    #: discrete columns; no CI test, so a column constant everywhere is only an isolated node
    needs = InputNeeds(values="discrete", varying=False)
    #: the options, read as attributes too
    ess, structure_prior, max_parents_fraction, cardinalities = option_attributes(
        "ess", "structure_prior", "max_parents_fraction", "cardinalities"
    )

    def __init__(self, options: Mapping[str, Any] | None = None, /, **keywords: Any) -> None:
        super().__init__(options, **keywords)
        self.levels: dict[str, list] = {}
        self.runner: StepRunner | None = None
        self.client_scores: dict[Family, dict[int, float]] = {}
        self.search: GESResult | None = None
        self.restarts = 0

    # ------------------------------------------------------------------ set-up
    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        """The structure prior needs ``structure_prior < p - 1`` (a probability below 1)."""
        p = len(info[min(info)].columns)
        prior = self.options.structure_prior
        if prior is not None and not prior < p - 1:
            raise InputError(
                f"the data have {p} variables, so "
                f"{spell('structure_prior', self.entry_point)} must be below "
                f"{p - 1} (each of the other {p - 1} variables is a parent with probability "
                f"structure_prior / {p - 1}), but it is {prior:g}",
                fix=Fix(
                    "set {} (no structure term) or a smaller value", (("structure_prior", None),)
                ),
                entry_point=self.entry_point,
            )

    @property
    def max_parents(self) -> float | None:
        """causal-learn's ``maxP``: the fraction times the number of variables."""
        fraction = self.options.max_parents_fraction
        return None if fraction is None else fraction * len(self.variables)

    def _start_search(self) -> None:
        self.runner = StepRunner(ges_steps(len(self.variables), self.max_parents))

    def payload(self) -> FamilyScoresRequest:
        """The ``family_scores`` payload (the families travel as its array)."""
        options = self.options
        return FamilyScoresRequest(
            self.variables, self.levels, options.ess, options.structure_prior, options.cardinalities
        )

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.search is not None:
            return None
        if self.runner is None:
            levels = self.global_levels()
            self.levels = {v: levels[v] or [] for v in self.variables}  # discrete: never None
            self._start_search()
        assert self.runner is not None  # just started
        alive = self.alive_clients
        while not self.runner.done:
            batch = cast(list[Family], self.runner.pending)
            missing = [f for f in batch if not self._scored_by_all(f, alive)]
            if missing:
                return Request(FAMILY_SCORES, self.payload(), arrays=[encode_families(missing)])
            self.runner.answer(self.worst_scores(batch, alive))
        self.search = cast(GESResult, self.runner.result)
        return None

    def _scored_by_all(self, key: Family, clients: list[int]) -> bool:
        known = self.client_scores.get(key)
        return known is not None and all(c in known for c in clients)

    def worst_scores(self, families: list[Family], clients: list[int]) -> np.ndarray:
        """Each family's smallest client log score (the worst client: the code's largest cost)."""
        return np.array(
            [min(self.client_scores[f][c] for c in clients) for f in families], dtype=np.float64
        )

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        families = decode_families(request.arrays[0], len(self.variables))
        n = len(families)
        for r in replies:
            scores = np.asarray(r.arrays[0]) if r.arrays else np.zeros(0)
            if (
                scores.shape != (n,)
                or not np.issubdtype(scores.dtype, np.floating)
                or not np.all(np.isfinite(scores))
            ):
                raise ClientProtocolError(
                    f"client {r.client} sent {scores.shape} scores of dtype {scores.dtype} for "
                    f"{n} families, expected one finite float per family"
                )
            for key, value in zip(families, scores.tolist(), strict=True):
                self.client_scores.setdefault(key, {})[r.client] = value
        self.annotate(families=n, clients=len(replies))

    def on_clients_dropped(self, dropped: list[int]) -> None:
        """Restart GES over the survivors' stored scores (see the module docstring)."""
        if self.runner is None or self.search is not None:
            return
        self.restarts += 1
        self._start_search()
        self.retract_request()

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        names = list(self.variables)
        if self.search is None:
            return {"variables": names}

        def named(ops: list[tuple[int, int, tuple[int, ...]]]) -> list[list]:
            return [[names[x], names[y], [names[v] for v in subset]] for x, y, subset in ops]

        return {
            "graph": self.search.graph(names),
            "variables": names,
            "score": self.search.score,
            "inserts": named(self.search.inserts),
            "deletes": named(self.search.deletes),
            "families_scored": self.search.families_scored,
            "options": {**self.options, "max_parents": self.max_parents},
        }


def make_strategy(options: Mapping[str, Any]) -> RFCDStrategy:
    """RFCD's strategy from its options (raw keywords work too)."""
    return RFCDStrategy(options)


register_method(
    "rfcd",
    RFCDStrategy,
    "fedcausal_flwr.clients.rfcd:RFCDClient",
    disclosures=DISCLOSURES,
    bootstrap=True,
    paper="RFCD (Mian et al.), as run in the FedC2SL paper (Wang et al.)",
    description="RFCD (Mian et al.): GES over BDeu, each family scored by its worst client",
)
