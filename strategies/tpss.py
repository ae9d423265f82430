"""FedCDnv with the two-level priority selection strategy (Wang, Cao, Yu, Liang, ICML 2025).

Clients observe **non-identical variable sets** ``O_k``; the result is one PAG (FedG) over their
union ``O`` plus FeddG, FedG restricted to the pairs the paper's theory calls definite. Two
communication rounds after ``hello`` (Algorithm 1):

1. ``fcdnv_init``: every client runs FCI (G2, alpha 0.05) on its own columns and sends its PAG.
   The server builds G0 (an adjacency if any client reports it, arrowheads unioned, tails dropped)
   and the status matrix ``stat`` (Theorem 3.1, Lemmas 3.2, 3.3) from G0 and the overlap pattern.
2. ``fcdnv_update``: G0 is broadcast; every client runs C-Update (imports G0's v-structures and
   orients ``Y --> B`` after extra local CI tests) and sends its updated PAG, its per-pair
   p-values transformed by Eq. (2) and its separating sets. The server decides each pair where
   the observing clients disagree by TPSS: Level 1 drops the edge if Conditions 3.6 / 3.7 explain
   the disagreement by the variable sets, else Level 2 keeps it iff ``val > 0`` (Eqs. 1, 3).
   Arrowheads are copied from the updated PAGs of the clients reporting the edge.

Methods registered here:

* ``fedcdnv``: the above.
* ``fedcdnv-vote``: the same pipeline (FCI, G0, C-Update, arrowhead union) with TPSS replaced by a
  plain majority of the clients observing the pair (a tie is no edge); its clients send no
  p-values and no separating sets.
* ``fci-base``: FCI on each client, then a sample-size-weighted vote
  ``sum_c (n_c / n') * (+-1) > 0`` and the arrowhead union; one round, no C-Update.

Choices where the paper is open (the paper's passage and the reason for each: docs/choices.md,
FedCDnv; all switchable through :class:`~fedcausal_flwr.discovery.tpss.TPSSOptions` run options):

* per-pair p-value (Algorithm 1 line 4): the maximum over every CI test FCI ran on the pair
  (skeleton and Possible-D-Sep phases); C-Update's tests do not feed it;
* separating set per removed pair: the first one FCI recorded (minimum size among those tried);
  clients send them in round 2; the server needs them for Condition 3.7;
* G0: tails dropped, arrowheads at both ends give ``<->``;
* ``stat``: Lemma 3.3's pair {A, B} is looked for in ``(A_X | A_Y) - {X, Y}``; the lemmas also
  turn non-adjacent overlapping pairs from -2 into -1 (``lemma_scope="all"``);
* C-Update: only the arrowhead at the collider is imported; step (b) runs whenever Y is
  observed, with ``|Z| <= update_depth`` (3), all imports before any propagation, a propagation
  that would put a tail over an arrowhead at Y skipped; Zhang's rules are not re-run
  (``update_rules``);
* Eq. (2): out-of-band p-values are sent raw; ``p = alpha`` is ``-0.0`` (in the band);
  the band edges are ``alpha - theta1``, ``alpha + theta2`` rounded to 12 decimals;
* TPSS runs only where the observing clients disagree (the paper's text); agreeing pairs keep
  the consensus, pairs nobody observes jointly are not adjacent;
* Level 1 (``level1="per_edge_type"``): every reporting client must be explained, ``<->``
  by Condition 3.6 (tails at Y accepted), ``o-o / o-> / <-o`` by Condition 3.7 (every
  denying client's sepset non-empty and not inside the reporting client's variables); an edge
  with a tail is never explained;
* Level 2: "definite" read as ``|stat| = 2`` with the client's own adjacency deciding causal or
  non-causal; Eq. (3)'s numerator ``phat * |K|`` over all observing clients, denominator
  ``sum phat (non-stable) + #stable``, ``w`` not clipped, ``w = 0`` on a zero
  denominator; out-of-band non-stable ``phat`` = the raw p-value; ``val = 0``: no edge;
* FeddG: FedG's edges with ``stat = 2`` (of G0) and the ``stat = -2`` non-edges; a ``stat = 2``
  pair TPSS removed is neither (``feddg_status="fedg"`` recomputes ``stat`` on FedG);
* FedG's marks: the arrowhead union, plus a tail where every client reporting the edge has one
  (``tails="consensus"``, default; ``"drop"`` is the paper's arrowheads-only FedG, every other
  mark a circle; arrowhead metrics are the same under both);
* clients that drop out after round 1 still shaped G0 and ``stat``; round 2 aggregates the rest.

Wire protocol (actions, payload records, replies): :mod:`fedcausal_flwr.protocols.tpss`.

What the server learns: each client's variable set and row count, its initial and updated PAGs,
one p-value per pair (Eq. 2 is invertible given alpha, theta1, theta2 and the PAG's adjacency, so
the transform hides nothing) and its separating sets. Every client receives G0, the union graph
over all clients' variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, replace
from typing import Any

import numpy as np

from fedcausal_flwr.discovery.tpss import (
    FEDDG_STATUS,
    LEMMA_SCOPES,
    LEVEL1_RULES,
    NUMERATORS,
    OUT_OF_BAND,
    STABLE_READINGS,
    TAIL_RULES,
    TPSSOptions,
    band_edges,
)
from fedcausal_flwr.discovery.tpss_select import (
    PairDecision,
    adjacency_share,
    majority_adjacency,
    restrict_to_definite,
    tpss_adjacency,
    transfer_arrowheads,
    weighted_adjacency,
)
from fedcausal_flwr.discovery.tpss_union import (
    observed_mask,
    overlap_matrix,
    status_matrix,
    stitch_order,
    union_graph,
)
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import ClientProtocolError, Reply, Request
from fedcausal_flwr.graphs.frequency import split_by_graph
from fedcausal_flwr.graphs.graph import ARROW, CIRCLE, NONE, TAIL, Graph
from fedcausal_flwr.metrics import edge_fdr, graph_metrics, non_edge_fdr
from fedcausal_flwr.options import Option, OptionSet, say
from fedcausal_flwr.protocols.queries import decode_queries
from fedcausal_flwr.protocols.tpss import (
    DISCLOSURES,
    FCDNV_INIT,
    FCDNV_UPDATE,
    LocalFciReply,
    LocalFciRequest,
    UpdateReply,
    UpdateRequest,
)
from fedcausal_flwr.result import Result
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy, Options, register_variants

Pair = tuple[int, int]
SCORE_KEYS = (
    "adj_precision",
    "adj_recall",
    "adj_f1",
    "arrow_precision",
    "arrow_recall",
    "arrow_f1",
)


# ============================================================================ options
_TPSS = TPSSOptions()  # the core's defaults, declared once there


def _theta_band(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Theorem 3's band needs ``0 < theta1 < alpha`` and ``0 < theta2 < 1 - alpha``."""
    alpha, theta1, theta2 = values["alpha"], values["theta1"], values["theta2"]
    if not theta1 < alpha:
        return (
            f"{say('theta1', theta1, entry_point)} must be below {say('alpha', alpha, entry_point)}"
        )
    if not theta2 < 1 - alpha:
        return f"{say('theta2', theta2, entry_point)} must be below 1 - alpha = {1 - alpha:g}"
    return None


BASE_OPTIONS = OptionSet(
    (
        shared.alpha(_TPSS.alpha, paper="0.05"),
        shared.test("g2", paper="G2"),
        shared.max_depth(help="largest conditioning set of the clients' local FCI"),
        # no background knowledge: the sites' local FCI runs on their own variable sets
        *(o for o in shared.fci_engine() if o.name != "knowledge"),
        Option(
            "lemma_scope",
            "str",
            _TPSS.lemma_scope,
            "apply Lemmas 3.2 / 3.3 to every overlapping pair (all) or only downgrade learned "
            "adjacencies (adjacent)",
            choices=LEMMA_SCOPES,
        ),
        Option(
            "tails",
            "str",
            _TPSS.tails,
            "FedG's marks: the client PAGs' arrowheads plus tails every reporting client agrees "
            "on (consensus), or arrowheads only (drop)",
            choices=TAIL_RULES,
            paper="drop (Algorithm 3, line 17)",
            why="a tail every reporting client agrees on is knowledge: with perfect tests FedG "
            "is then exactly the true PAG (arrowhead metrics are the same)",
        ),
        Option(
            "feddg_status",
            "str",
            _TPSS.feddg_status,
            "FeddG keeps the pairs definite by the status matrix of G0 or of FedG",
            choices=FEDDG_STATUS,
        ),
    )
)
UPDATE_OPTIONS = BASE_OPTIONS.extend(
    replace(  # a depth cap like the local FCI's, under C-Update's name
        shared.max_depth(
            _TPSS.update_depth, help="largest conditioning set of C-Update's extra tests"
        ),
        name="update_depth",
    ),
    Option(
        "update_rules",
        "bool",
        _TPSS.update_rules,
        "re-run Zhang's rules on the client after C-Update (off: Algorithm 2 as written)",
    ),
)


def _half_width(name: str, help: str, paper: str) -> Option:
    """``theta1`` or ``theta2``: a half-width of Eq. (2)'s band (> 0; :func:`_theta_band`)."""
    default = getattr(_TPSS, name)
    return Option(name, "float", default, help, minimum=0.0, min_exclusive=True, paper=paper)


FEDCDNV_OPTIONS = UPDATE_OPTIONS.extend(
    _half_width(
        "theta1",
        "lower half-width of the uncertain p-value band [alpha - theta1, alpha + theta2]",
        "0.049",
    ),
    _half_width("theta2", "upper half-width of the uncertain band", "0.45"),
    Option(
        "level1",
        "str",
        _TPSS.level1,
        "TPSS Level 1: fire when every adjacency-reporting client is explained by its edge "
        "type's condition (per_edge_type), when one is (any), or never (off)",
        choices=LEVEL1_RULES,
    ),
    Option(
        "tail_at_confounder",
        "bool",
        _TPSS.tail_at_confounder,
        "Condition 3.6 also accepts tails at the confounder",
    ),
    Option(
        "w_numerator",
        "str",
        _TPSS.w_numerator,
        "Eq. (3)'s numerator: phat times all observing clients, or times the non-stable ones",
        choices=NUMERATORS,
    ),
    Option("clip_w", "bool", _TPSS.clip_w, "clip Eq. (3)'s weight to 1"),
    Option(
        "out_of_band",
        "str",
        _TPSS.out_of_band,
        "phat of a non-stable relationship outside the band: its raw p-value, or 1",
        choices=OUT_OF_BAND,
    ),
    Option(
        "stable_reading",
        "str",
        _TPSS.stable_reading,
        "'definite' in Defs. 3.4 / 3.5 as |status| = 2 with the client's own adjacency (abs), "
        "or as the status sign matching the client's report (signed)",
        choices=STABLE_READINGS,
    ),
    checks=(_theta_band,),
)


def tpss_options(values: Mapping[str, Any]) -> TPSSOptions:
    """The TPSS core's options of a method's resolved options. Fields the method does not
    declare keep the core's defaults; the baselines' unused thetas are moved inside the band
    when ``alpha`` would put them outside (half of it)."""
    tpss = {k: v for k, v in values.items() if k in TPSSOptions.__dataclass_fields__}
    alpha = values["alpha"]
    tpss.setdefault("theta1", _TPSS.theta1 if _TPSS.theta1 < alpha else alpha / 2)
    tpss.setdefault("theta2", _TPSS.theta2 if _TPSS.theta2 < 1 - alpha else (1 - alpha) / 2)
    return TPSSOptions(**tpss)


class FedCDnvOptions(Options):
    """FedCDnv's resolved options, and the uncertain p-value band its thetas set (``band``)."""

    __slots__ = ()

    @property
    def band(self) -> tuple[float, float]:
        """Eq. (2)'s band ``[alpha - theta1, alpha + theta2]`` (fedcdnv's options only)."""
        return band_edges(self.alpha, self.theta1, self.theta2)


class FedCDnvStrategy(MethodStrategy):
    """FedCDnv, and its baselines by ``aggregation``: ``vote`` is ``fedcdnv-vote`` (TPSS
    replaced by a plain majority of the observing clients, a tie no edge; its clients send no
    p-values and no separating sets), ``weighted`` is ``fci-base`` (FCI on each client, a
    sample-size-weighted vote and the arrowhead union; one round, no C-Update)."""

    name = "fedcdnv"
    OPTIONS = FEDCDNV_OPTIONS
    #: aggregation -> the method it makes and its options
    VARIANTS = {
        "tpss": ("fedcdnv", FEDCDNV_OPTIONS),
        "vote": ("fedcdnv-vote", UPDATE_OPTIONS),
        "weighted": ("fci-base", BASE_OPTIONS),
    }
    #: Non-identical variable sets by design; discrete columns; local FCI on each client's rows.
    needs = InputNeeds(same_columns=False, values="discrete", local_tests=True)

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, aggregation: str = "tpss",
        **keywords: Any,
    ) -> None:  # fmt: skip
        super().__init__(options, variant=aggregation, **keywords)
        #: how round 2 (round 1 for ``weighted``) decides the adjacencies: TPSS, a majority, a
        #: vote weighted by the clients' rows
        self.aggregation = aggregation
        self.options = FedCDnvOptions(self.options)  # the same values, and their band
        #: the TPSS core's options (:func:`tpss_options`)
        self.tpss = tpss_options(self.options)
        #: the clients' FCI options, as they travel
        self.fci = {
            "max_depth": self.options.max_depth,
            "possible_dsep": self.options.possible_dsep,
            "pds_max_size": self.options.pds_max_size,
            "rules": self.options.fci_rules,
        }
        self.union: list[str] = []
        self.levels: dict[str, list] = {}
        self.observed: dict[int, np.ndarray] = {}
        self.sizes: dict[int, int] = {}
        self.initial: dict[int, np.ndarray] = {}
        self.updated: dict[int, np.ndarray] = {}
        self.ptil: dict[int, np.ndarray] = {}
        self.sepsets: dict[int, dict[Pair, tuple[int, ...]]] = {}
        self.client_meta: dict[int, dict] = {}
        self.g0: np.ndarray | None = None
        self.status: np.ndarray | None = None
        self.overlap: np.ndarray | None = None
        self.fedg: np.ndarray | None = None
        self.decisions: list[PairDecision] = []
        self.aggregated_clients: list[int] = []
        #: the aggregated graphs' adjacency shares per pair (``edge_votes``); NaN: nobody sees it
        self.adjacency_share: np.ndarray | None = None

    # ------------------------------------------------------------------ set-up
    @property
    def variables(self) -> list[str]:
        """The union of the clients' variables (after hello), in a stitched global order."""
        return list(self.union) if self.union else super().variables

    def input_needs(self) -> InputNeeds:
        return replace(self.needs, test=self.options.test)

    def _start(self) -> None:
        pids = sorted(self.client_info)
        self.union = stitch_order([self.client_info[p].columns for p in pids])
        merged = self.global_levels()
        self.levels = {}
        for v in self.union:
            levels = merged[v]
            if levels is None or len(levels) < 2:
                raise ValueError(
                    f"variable {v!r} has levels {levels} over all clients; a CI test needs at "
                    "least two"
                )
            self.levels[v] = levels
        index = {v: k for k, v in enumerate(self.union)}
        self.observed = {
            p: np.array([index[c] for c in self.union if c in set(self.client_info[p].columns)])
            for p in pids
        }

    def _fci_request(self) -> LocalFciRequest:
        """Round 1's request, which round 2's extends."""
        return LocalFciRequest(
            self.union, self.levels, self.options.test, self.tpss.alpha, self.fci
        )

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        if self.fedg is not None:
            return None
        if self.g0 is None:
            self._start()
            return Request(FCDNV_INIT, self._fci_request())
        payload = UpdateRequest(
            self.union,
            self.levels,
            self.options.test,
            self.tpss.alpha,
            self.fci,
            update_depth=self.tpss.update_depth,
            update_rules=self.tpss.update_rules,
            theta1=self.tpss.theta1,
            theta2=self.tpss.theta2,
            send_statistics=self.aggregation == "tpss",
        )
        return Request(FCDNV_UPDATE, payload, arrays=[self.g0], nan_ok=True)

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == FCDNV_INIT:
            self._integrate(replies)
            if self.aggregation == "weighted":
                self._finish_fci_base()
        else:
            self._aggregate(replies)

    # ------------------------------------------------------------------ round 1
    def _client_graph(self, reply: Reply, what: str) -> np.ndarray:
        """Check a reply's ids and ``d_k x d_k`` marks; return the marks embedded in ``d x d``."""
        expected = self.observed[reply.client]
        ids = np.asarray(reply.arrays[0]) if reply.arrays else np.zeros(0)
        if ids.shape != expected.shape or not np.array_equal(ids, expected):
            raise ClientProtocolError(
                f"client {reply.client} sent variable ids {ids.tolist()} with its {what}, but "
                f"its columns are ids {expected.tolist()}"
            )
        k = len(expected)
        marks = np.asarray(reply.arrays[1]) if len(reply.arrays) > 1 else np.zeros(0)
        if marks.shape != (k, k) or not np.isin(marks, (NONE, TAIL, ARROW, CIRCLE)).all():
            raise ClientProtocolError(
                f"client {reply.client} sent a {what} of shape {marks.shape} (expected {k}x{k}) "
                "or with unknown mark codes"
            )
        try:
            Graph(tuple(self.union[i] for i in expected), marks)
        except ValueError as err:
            raise ClientProtocolError(
                f"client {reply.client} sent an invalid {what}: {err}"
            ) from None
        out = np.zeros((len(self.union), len(self.union)), dtype=np.int8)
        out[np.ix_(expected, expected)] = marks
        return out

    def _integrate(self, replies: list[Reply]) -> None:
        for r in replies:
            self.initial[r.client] = self._client_graph(r, "PAG")
            meta = r.meta_as(LocalFciReply)
            n_rows = int(meta.n_rows)
            if n_rows != self.client_info[r.client].n_rows:
                raise ClientProtocolError(
                    f"client {r.client} reports n_k = {n_rows} but said "
                    f"{self.client_info[r.client].n_rows} rows in hello"
                )
            self.sizes[r.client] = n_rows
            self.client_meta[r.client] = {"init_tests": int(meta.tests)}
        pids = sorted(self.initial)
        d = len(self.union)
        mask = observed_mask([self.observed[p] for p in pids], d)
        self.overlap = overlap_matrix(mask)
        self.g0 = union_graph(np.stack([self.initial[p] for p in pids]))
        self.status = status_matrix(self.g0 != NONE, self.overlap, self.tpss.lemma_scope)
        counts = self._status_counts(self.status)
        self.annotate(g0_edges=int(np.count_nonzero(np.triu(self.g0 != NONE))), **counts)

    def _finish_fci_base(self) -> None:
        pids = sorted(self.initial)
        marks = np.stack([self.initial[p] for p in pids])
        mask = observed_mask([self.observed[p] for p in pids], len(self.union))
        adjacency = weighted_adjacency(marks, mask, [self.sizes[p] for p in pids])
        self.adjacency_share = adjacency_share(marks, mask, [self.sizes[p] for p in pids])
        self.aggregated_clients = pids
        self.fedg = transfer_arrowheads(adjacency, marks, self.tpss.tails)

    # ------------------------------------------------------------------ round 2
    def _statistics(self, reply: Reply, marks: np.ndarray) -> None:
        ids = self.observed[reply.client]
        k = len(ids)
        if len(reply.arrays) != 4:
            raise ClientProtocolError(
                f"client {reply.client} sent {len(reply.arrays)} arrays; expected ids, PAG, "
                "transformed p-values and separating sets"
            )
        ptil = np.asarray(reply.arrays[2], dtype=np.float64)
        if ptil.shape != (k, k):
            raise ClientProtocolError(
                f"client {reply.client} sent p-values of shape {ptil.shape}, expected {k}x{k}"
            )
        full = np.full((len(self.union), len(self.union)), np.nan)
        full[np.ix_(ids, ids)] = ptil
        self.ptil[reply.client] = full
        allowed = set(ids.tolist())
        adjacent = marks != NONE
        sepsets: dict[Pair, tuple[int, ...]] = {}
        try:
            rows = decode_queries(np.asarray(reply.arrays[3]))
        except ValueError as err:
            raise ClientProtocolError(
                f"client {reply.client} sent bad separating sets: {err}"
            ) from None
        for x, y, s in rows:
            key = (min(x, y), max(x, y))
            if not ({x, y, *s} <= allowed) or x == y or adjacent[x, y] or key in sepsets:
                raise ClientProtocolError(
                    f"client {reply.client} sent the separating set {list(s)} for the pair "
                    f"{key}, which is not a non-adjacent pair of its variables (or repeats)"
                )
            sepsets[key] = tuple(sorted(s))
        sub = adjacent[np.ix_(ids, ids)]
        rows_, cols_ = np.nonzero(np.triu(~sub, k=1))
        missing = [
            (int(ids[a]), int(ids[b]))
            for a, b in zip(rows_.tolist(), cols_.tolist(), strict=True)
            if (int(ids[a]), int(ids[b])) not in sepsets
        ]
        if missing:
            raise ClientProtocolError(
                f"client {reply.client} gave no separating set for its non-adjacent pairs {missing}"
            )
        self.sepsets[reply.client] = sepsets

    def _aggregate(self, replies: list[Reply]) -> None:
        for r in replies:
            marks = self._client_graph(r, "updated PAG")
            if np.any((marks != NONE) != (self.initial[r.client] != NONE)):
                raise ClientProtocolError(
                    f"client {r.client} changed adjacencies in C-Update (it may change marks only)"
                )
            self.updated[r.client] = marks
            if self.aggregation == "tpss":
                self._statistics(r, marks)
            meta = r.meta_as(UpdateReply)
            self.client_meta[r.client].update(
                update_tests=int(meta.tests),
                imported=int(meta.imported),
                propagated=int(meta.propagated),
                conflicts=int(meta.conflicts),
            )
        pids = sorted(self.updated)
        self.aggregated_clients = pids
        marks = np.stack([self.updated[p] for p in pids])
        mask = observed_mask([self.observed[p] for p in pids], len(self.union))
        if self.aggregation == "tpss":
            assert self.status is not None  # round 1 set it
            adjacency, self.decisions = tpss_adjacency(
                marks,
                mask,
                np.stack([self.ptil[p] for p in pids]),
                [self.sizes[p] for p in pids],
                self.status,
                [self.sepsets[p] for p in pids],
                self.tpss,
            )
            # decisions index clients by position: report partition ids
            for dec in self.decisions:
                dec.reporting = [pids[c] for c in dec.reporting]
                dec.denying = [pids[c] for c in dec.denying]
                dec.reasons = {pids[c]: why for c, why in dec.reasons.items()}
        else:
            adjacency = majority_adjacency(marks, mask)
        self.adjacency_share = adjacency_share(marks, mask, [1] * len(pids))
        self.fedg = transfer_arrowheads(adjacency, marks, self.tpss.tails)
        level1 = sum(d.level == 1 for d in self.decisions)
        self.annotate(fedg_edges=int(np.count_nonzero(np.triu(adjacency))), level1_removed=level1)

    # ------------------------------------------------------------------ result
    @staticmethod
    def _status_counts(status: np.ndarray) -> dict[str, int]:
        upper = status[np.triu_indices(status.shape[0], k=1)]
        names = {
            -2: "definite_noncausal",
            -1: "nondefinite_noncausal",
            1: "nondefinite_causal",
            2: "definite_causal",
        }
        return {names[v]: int(np.count_nonzero(upper == v)) for v in (-2, -1, 1, 2)}

    def feddg_status(self) -> np.ndarray:
        assert self.status is not None and self.overlap is not None  # round 1 set them
        if self.tpss.feddg_status == "fedg":
            assert self.fedg is not None  # the run has finished
            return status_matrix(self.fedg != NONE, self.overlap, self.tpss.lemma_scope)
        return self.status

    def result_payload(self) -> dict:
        assert self.fedg is not None and self.overlap is not None  # the run has finished
        names = tuple(self.union)
        status = self.feddg_status()
        feddg, definite_edges, definite_non_edges = restrict_to_definite(self.fedg, status)

        def pair_name(i: int, j: int) -> str:
            return f"{names[i]}|{names[j]}"

        never = np.argwhere(np.triu(~self.overlap, k=1))
        pids = sorted(self.observed)
        pairwise = all(
            np.intersect1d(self.observed[a], self.observed[b]).size > 0
            for k, a in enumerate(pids)
            for b in pids[k + 1 :]
        )
        clients = {
            str(p): {
                "variables": [names[i] for i in self.observed[p]],
                "n_rows": self.sizes.get(p),
                "init_edges": int(np.count_nonzero(np.triu(self.initial[p] != NONE)))
                if p in self.initial
                else None,
                **self.client_meta.get(p, {}),
            }
            for p in pids
        }
        return {
            "graph": Graph(names, self.fedg, "PAG"),
            "variables": list(names),
            "aggregation": self.aggregation,
            "feddg": Graph(names, feddg, "PAG").to_json(),
            "g0": Graph(names, self.g0, "PAG").to_json(),
            "status": status.astype(int).tolist(),
            "status_source": self.tpss.feddg_status,
            "status_counts": self._status_counts(status),
            "definite_edges": int(np.count_nonzero(np.triu(definite_edges))),
            "definite_non_edges": int(np.count_nonzero(np.triu(definite_non_edges))),
            "never_together": [pair_name(int(i), int(j)) for i, j in never],
            "pairwise_overlap": bool(pairwise),
            "clients": clients,
            "aggregated_clients": list(self.aggregated_clients),
            "decisions": [
                {
                    "pair": pair_name(*d.pair),
                    "reporting": d.reporting,
                    "denying": d.denying,
                    "level": d.level,
                    "value": d.value,
                    "adjacent": d.adjacent,
                    "reasons": {str(c): why for c, why in d.reasons.items()},
                }
                for d in self.decisions
            ],
            "options": {"test": self.options.test, "fci": dict(self.fci), **asdict(self.tpss)},
            "edge_votes": self.edge_votes(),
        }

    def edge_votes(self) -> dict[str, list[list]]:
        """Per pair some aggregated client's graph has, the share of the clients observing both
        variables whose graph has it (weighted by rows for ``fci-base``): ``kept`` edges of the
        result ``[x, y, share]`` and ``removed`` pairs ``[x, y, share]``."""
        assert self.fedg is not None and self.adjacency_share is not None  # the run has finished
        share = self.adjacency_share
        return split_by_graph(self.union, share, np.nan_to_num(share) > 0, self.fedg != NONE)


#: method name -> its aggregation (FedCDnvStrategy's variant)
AGGREGATION = {name: variant for variant, (name, _) in FedCDnvStrategy.VARIANTS.items()}


# ============================================================================ scoring
def score_result(result: Result, truth: Graph) -> dict[str, float]:
    """FedCDnv's metrics of a result of this module against the true PAG over the union.

    ``adj_*`` (pre-edge, rec-edge, F1-edge), ``arrow_*`` (pre/rec/F1-orie read as arrowhead
    precision / recall: docs/choices.md, FedCDnv), and Table 2's FDR-C / FDR-dC / FDR-nC / FDR-dnC
    with the definite pairs of ``result.extra["status"]`` (+2 and -2).
    """
    learned = result.graph
    if learned is None:
        raise ValueError(f"the {result.method} result has no graph to score")
    names = list(learned.names)  # the status matrix is in the result graph's node order
    status = np.asarray(result.extra["status"])
    pairs_pos = [(names[i], names[j]) for i, j in np.argwhere(np.triu(status == 2, k=1))]
    pairs_neg = [(names[i], names[j]) for i, j in np.argwhere(np.triu(status == -2, k=1))]
    summary = graph_metrics(learned, truth)  # arrowheads = FedCDnv's orientation metric
    return {
        **{k: summary[k] for k in SCORE_KEYS},
        "fdr_c": edge_fdr(learned, truth),
        "fdr_dc": edge_fdr(learned, truth, pairs_pos),
        "fdr_nc": non_edge_fdr(learned, truth),
        "fdr_dnc": non_edge_fdr(learned, truth, pairs_neg),
        "n_edges": learned.n_edges(),
    }


# ============================================================================ registration
def make_strategy(options: Mapping[str, Any], method: str) -> FedCDnvStrategy:
    """Method ``method``'s strategy from its options (raw keywords work too)."""
    if method not in AGGREGATION:
        raise ValueError(f"unknown method {method!r}; expected one of {sorted(AGGREGATION)}")
    return FedCDnvStrategy(options, aggregation=AGGREGATION[method])


def fedcdnv_vote_strategy(options: Mapping[str, Any]) -> FedCDnvStrategy:
    """``fedcdnv-vote``: FedCDnv with a plain majority instead of TPSS."""
    return FedCDnvStrategy(options, aggregation="vote")


def fci_base_strategy(options: Mapping[str, Any]) -> FedCDnvStrategy:
    """``fci-base``: local FCI and a sample-size-weighted vote."""
    return FedCDnvStrategy(options, aggregation="weighted")


DESCRIPTIONS = {
    "tpss": "FedCDnv (Wang et al.): local FCI on non-identical variable sets, G0, C-Update, "
    "TPSS aggregation; FedG + FeddG over the union",
    "vote": "FedCDnv with TPSS replaced by a plain majority of the observing clients",
    "weighted": "local FCI per client, sample-size-weighted adjacency vote, arrowhead union",
}
for _makers, _paper in (
    ({"tpss": FedCDnvStrategy, "vote": fedcdnv_vote_strategy}, "FedCDnv (Wang et al., ICML 2025)"),
    ({"weighted": fci_base_strategy}, "baseline (FedCDnv)"),
):
    register_variants(
        _makers,
        FedCDnvStrategy.VARIANTS,
        DESCRIPTIONS,
        "fedcausal_flwr.clients.tpss:FedCDnvClient",
        disclosures=DISCLOSURES,
        paper=_paper,
        min_sites=2,
    )

__all__ = [
    "FedCDnvStrategy",
    "fci_base_strategy",
    "fedcdnv_vote_strategy",
    "make_strategy",
    "score_result",
    "tpss_options",
]
