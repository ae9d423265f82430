"""Structure-learning metrics, each with the exact definition it implements (the papers differ).

Conventions shared by every function:

* Graphs are compared by node *name*: the learned graph is reordered to the truth's node order, and
  a ValueError names the nodes if the two node sets differ.
* An "arrowhead" is an ordered pair (u, v) with an arrow mark at v on an edge u-v
  (``marks[u, v] == ARROW``): ``u --> v`` has one (at v), ``u <-> v`` two, ``u o-> v`` one, and
  undirected ``u --- v`` or ``u o-o v`` none.
* Precision, recall and F1 follow the FedECD/Causal-Learner evaluator (``eva_DAG.m``):
  precision = TP / (TP + FP), or, when nothing is predicted, 1 if FN = 0 else 0; recall =
  TP / (TP + FN), or, when nothing is true, 1 if FP = 0 else 0; F1 = 2PR / (P + R), 0 if P + R = 0.
* Which truth to compare with is the caller's choice: a CPDAG learner against
  ``dag_to_cpdag(dag)``, an FCI learner against ``dag_to_pag(dag, latent)``, a DAG learner against
  the DAG.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from fedcausal_flwr.graphs.graph import ARROW, MARK_CODES, NONE, TAIL, Graph

SHD_VARIANTS = ("standard", "causallearn-0.1.2.8", "entries")


# ============================================================================ alignment
def align(learned: Graph, truth: Graph) -> Graph:
    """``learned`` with its nodes in ``truth``'s order; ValueError if the node sets differ."""
    if learned.names == truth.names:
        return learned
    missing = sorted(set(truth.names) - set(learned.names))
    extra = sorted(set(learned.names) - set(truth.names))
    if missing or extra:
        raise ValueError(
            f"cannot compare graphs over different nodes: missing from the learned graph "
            f"{missing}, not in the truth {extra}"
        )
    return learned.subgraph(list(truth.names))


def _pair_mask(truth: Graph, pairs: Iterable[Sequence] | np.ndarray | None) -> np.ndarray:
    """Upper-triangular boolean mask of the unordered pairs to evaluate (all pairs by default)."""
    p = truth.n_nodes
    if pairs is None:
        return np.triu(np.ones((p, p), dtype=bool), k=1)
    if isinstance(pairs, np.ndarray) and pairs.dtype == bool:
        if pairs.shape != (p, p):
            raise ValueError(f"a pair mask must be {p}x{p}, got {pairs.shape}")
        sym = pairs | pairs.T
        return np.triu(sym, k=1)
    mask = np.zeros((p, p), dtype=bool)
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"a pair must have two nodes, got {pair!r}")
        i, j = truth.index(pair[0]), truth.index(pair[1])
        if i == j:
            raise ValueError(f"a pair needs two different nodes, got {pair!r}")
        mask[min(i, j), max(i, j)] = True
    return mask


def _rates(tp: int, fp: int, fn: int) -> dict[str, float]:
    if tp + fp:
        precision = tp / (tp + fp)
    else:
        precision = 1.0 if fn == 0 else 0.0
    if tp + fn:
        recall = tp / (tp + fn)
    else:
        recall = 1.0 if fp == 0 else 0.0
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return {"precision": precision, "recall": recall, "f1": f1, "tp": tp, "fp": fp, "fn": fn}


# ============================================================================ SHD
def shd(learned: Graph, truth: Graph, variant: str = "standard") -> int:
    """Structural Hamming distance.

    * ``standard``: over unordered pairs, +1 for each pair whose edges differ in any way: missing
      edge, extra edge, or a commonly adjacent pair with any different end mark (reversed, directed
      vs undirected, ``-->`` vs ``<->``, a circle vs anything else). Equals causal-learn 0.1.4.8's
      ``SHD``; for DAGs it is #missing + #extra + #reversed; for CPDAGs a wrong orientation costs 1.
    * ``causallearn-0.1.2.8``: the lenient rule of causal-learn 0.1.2.8 (used by FedC2SL): +1 per
      pair adjacent in exactly one graph, and, over *ordered* pairs (i, j) adjacent in both, +1 when
      the truth has an arrowhead at j and the estimate an arrowhead at i. So a reversed edge or
      ``-->`` vs ``<->`` costs 1, directed vs undirected costs 0, a correct ``<->`` costs 2, and
      circles are never penalised.
    * ``entries`` (fedCI's ``shd_PAG``): the number of differing off-diagonal entries of the two
      end-mark matrices: a missing or extra edge costs 2, each wrong end mark costs 1.
    """
    learned = align(learned, truth)
    lm, tm = learned.marks, truth.marks
    if variant == "standard":
        differ = (lm != tm) | (lm.T != tm.T)
        return int(np.count_nonzero(np.triu(differ, k=1)))
    if variant == "causallearn-0.1.2.8":
        la, ta = lm != NONE, tm != NONE
        adjacency_errors = np.count_nonzero(np.triu(la != ta, k=1))
        arrow_errors = np.count_nonzero(la & ta & (tm == ARROW) & (lm.T == ARROW))
        return int(adjacency_errors + arrow_errors)
    if variant == "entries":
        return int(np.count_nonzero(lm != tm))
    raise ValueError(f"unknown SHD variant {variant!r}; expected one of {SHD_VARIANTS}")


def normalised_shd(learned: Graph, truth: Graph, variant: str = "standard") -> float:
    """SHD divided by its number of units: p(p-1)/2 pairs, or p(p-1) end marks for ``entries``.

    fedCI reports ``normalised_shd(..., variant="entries")`` (SHD / 20 for its 5-node PAGs).
    """
    p = truth.n_nodes
    units = p * (p - 1) if variant == "entries" else p * (p - 1) // 2
    if units == 0:
        return 0.0
    return shd(learned, truth, variant) / units


# ============================================================================ adjacencies, marks
def adjacency_metrics(
    learned: Graph, truth: Graph, pairs: Iterable[Sequence] | np.ndarray | None = None
) -> dict[str, float]:
    """Precision, recall and F1 of the skeleton (FedCDnv's pre-edge / rec-edge / F1-edge).

    TP = pairs adjacent in both, FP = adjacent only in the learned graph, FN = only in the truth,
    counted over unordered pairs (optionally only those in ``pairs``).
    """
    learned = align(learned, truth)
    mask = _pair_mask(truth, pairs)
    la, ta = (learned.marks != NONE) & mask, (truth.marks != NONE) & mask
    return _rates(
        int(np.count_nonzero(la & ta)),
        int(np.count_nonzero(la & ~ta)),
        int(np.count_nonzero(~la & ta)),
    )


def mark_metrics(learned: Graph, truth: Graph, mark: str | int = "arrow") -> dict[str, float]:
    """Precision, recall and F1 of one kind of end mark over ordered pairs.

    A prediction is an ordered pair (u, v) with ``mark`` at v on a learned edge u-v; it is correct
    if the truth has the same mark at v on its edge u-v.
    """
    code = MARK_CODES[mark] if isinstance(mark, str) else int(mark)
    if code == NONE:
        raise ValueError("mark_metrics needs an edge mark (arrow, tail or circle), not NONE")
    learned = align(learned, truth)
    pred, true = learned.marks == code, truth.marks == code
    return _rates(
        int(np.count_nonzero(pred & true)),
        int(np.count_nonzero(pred & ~true)),
        int(np.count_nonzero(~pred & true)),
    )


def arrowhead_metrics(learned: Graph, truth: Graph) -> dict[str, float]:
    """Arrowhead precision, recall and F1 (FedECD's Ar_P / Ar_R / Ar_F1; FedLCS's F1 globally).

    Counted over ordered pairs with an arrowhead (see the module docstring). A reversed directed
    edge is one FP (the learned arrowhead) and one FN (the true one); an undirected learned edge
    where the truth is directed is one FN; TPR = recall and FDR = 1 - precision.
    """
    return mark_metrics(learned, truth, ARROW)


def orientation_metrics(learned: Graph, truth: Graph) -> dict[str, float]:
    """FedCDnv's pre-orie / rec-orie / F1-orie (Sec. 4.1, undefined: docs/choices.md, FedCDnv).

    Arrowhead-mark precision and recall against the true PAG over the observed nodes: predicted
    marks are the ordered pairs (X, Y) with an arrowhead at Y on a learned edge, true marks the same
    in the true PAG. Identical to :func:`arrowhead_metrics` with a PAG as truth.
    """
    return arrowhead_metrics(learned, truth)


def edge_type_accuracy(learned: Graph, truth: Graph) -> float:
    """Share of commonly adjacent pairs whose two end marks both match (1.0 if none in common)."""
    learned = align(learned, truth)
    lm, tm = learned.marks, truth.marks
    common = np.triu((lm != NONE) & (tm != NONE), k=1)
    n = int(np.count_nonzero(common))
    if n == 0:
        return 1.0
    same = (lm == tm) & (lm.T == tm.T)
    return int(np.count_nonzero(common & same)) / n


def edge_fdr(
    learned: Graph, truth: Graph, pairs: Iterable[Sequence] | np.ndarray | None = None
) -> float:
    """FedCDnv's FDR-C: #(learned adjacencies not in the truth) / #(learned adjacencies).

    Restricted to ``pairs`` (e.g. the definite pairs, for FDR-dC) when given; 0.0 if the learned
    graph has no adjacency among them.
    """
    learned = align(learned, truth)
    mask = _pair_mask(truth, pairs)
    la, ta = (learned.marks != NONE) & mask, truth.marks != NONE
    n = int(np.count_nonzero(la))
    return int(np.count_nonzero(la & ~ta)) / n if n else 0.0


def non_edge_fdr(
    learned: Graph, truth: Graph, pairs: Iterable[Sequence] | np.ndarray | None = None
) -> float:
    """FedCDnv's FDR-nC (a false-omission rate): #(learned non-adjacent pairs adjacent in the truth)
    / #(learned non-adjacent pairs), over ``pairs`` if given (FDR-dnC); 0.0 if there are none."""
    learned = align(learned, truth)
    mask = _pair_mask(truth, pairs)
    ln, ta = (learned.marks == NONE) & mask, truth.marks != NONE
    n = int(np.count_nonzero(ln))
    return int(np.count_nonzero(ln & ta)) / n if n else 0.0


# ============================================================================ local structure
def local_metrics(learned: Graph, truth: Graph, target: int | str) -> dict[str, float]:
    """FedLCS's per-target metrics (Causal-Learner ``eva_LCS_arrhd.m`` and ``eva_LCS_SHD.m``).

    Learned: parents P^, children C^, and every other neighbour (undirected, bidirected, circle
    marks) U^; PC^ = all learned neighbours. Truth: parents P, children C, PC = all true neighbours.
    hits = |P^ & P| + |C^ & C|; precision = hits / |PC^| and recall = hits / |PC| (so undirected and
    wrongly oriented neighbours count in the denominators only), F1 = 2PR / (P + R); both
    neighbourhoods empty gives 1, exactly one empty gives 0. ``shd`` counts the target's incident
    pairs whose edges differ (missing, extra, reversed, undirected vs directed), once per pair.
    """
    learned = align(learned, truth)
    t = truth.index(target)
    lm, tm = learned.marks, truth.marks
    l_adj, t_adj = lm[t] != NONE, tm[t] != NONE
    l_par = (lm[:, t] == ARROW) & (lm[t, :] == TAIL)
    l_chi = (lm[t, :] == ARROW) & (lm[:, t] == TAIL)
    t_par = (tm[:, t] == ARROW) & (tm[t, :] == TAIL)
    t_chi = (tm[t, :] == ARROW) & (tm[:, t] == TAIL)
    hits = int(np.count_nonzero(l_par & t_par) + np.count_nonzero(l_chi & t_chi))
    rates = _rates(
        hits,
        int(np.count_nonzero(l_adj)) - hits,
        int(np.count_nonzero(t_adj)) - hits,
    )
    differ = (lm[t] != tm[t]) | (lm[:, t] != tm[:, t])
    rates["shd"] = int(np.count_nonzero(differ))
    return rates


def target_neighbourhood(learned: Graph, truth: Graph, target: str) -> tuple[Graph, Graph]:
    """The pairs :func:`local_metrics` scores, as two ``LOCAL`` graphs over the same nodes.

    A local-structure method (FedLCS) claims the target's parents and children, nothing about the
    edges among them, so both graphs keep only the edges at ``target``, over the target, its true
    parents and children and its learned neighbours (``truth``'s order). ``learned`` may cover
    a subset of ``truth``'s nodes (a ``LOCAL`` graph over what its search touched). Their
    :func:`shd` is ``local_metrics``'s, and :func:`graph_metrics` of them scores the
    neighbourhood in the usual columns (adjacency F1: the parents-and-children set's).
    """
    unknown = sorted(set(learned.names) - set(truth.names))
    if unknown or target not in truth.names:
        missing = unknown or [target]
        raise ValueError(
            f"cannot compare a local structure at {target!r}: {missing} not in the truth"
        )
    p = truth.n_nodes
    where = [truth.index(v) for v in learned.names]
    embedded = np.zeros((p, p), dtype=truth.marks.dtype)
    embedded[np.ix_(where, where)] = learned.marks
    t = truth.index(target)
    at_target = np.zeros((p, p), dtype=bool)
    at_target[t, :] = at_target[:, t] = True
    lm = np.where(at_target, embedded, NONE)
    tm = np.where(at_target, truth.marks, NONE)
    keep = (lm[t] != NONE) | (tm[t] != NONE)
    keep[t] = True
    nodes = np.flatnonzero(keep)
    names = tuple(truth.names[i] for i in nodes)
    pick = np.ix_(nodes, nodes)
    return Graph(names, lm[pick], "LOCAL"), Graph(names, tm[pick], "LOCAL")


# ============================================================================ summary
def graph_metrics(learned: Graph, truth: Graph) -> dict[str, float]:
    """The usual summary of a learned graph against its truth.

    ``shd`` (standard), ``shd_normalised`` (standard / (p(p-1)/2)), ``shd_cl0128`` (causal-learn
    0.1.2.8), ``adj_precision/recall/f1``, ``arrow_precision/recall/f1``, ``tpr`` (= arrowhead
    recall) and ``fdr`` (= 1 - arrowhead precision), as in FedECD; plus edge counts.
    """
    learned = align(learned, truth)
    adj = adjacency_metrics(learned, truth)
    arr = arrowhead_metrics(learned, truth)
    return {
        "shd": shd(learned, truth),
        "shd_normalised": normalised_shd(learned, truth),
        "shd_cl0128": shd(learned, truth, "causallearn-0.1.2.8"),
        "adj_precision": adj["precision"],
        "adj_recall": adj["recall"],
        "adj_f1": adj["f1"],
        "arrow_precision": arr["precision"],
        "arrow_recall": arr["recall"],
        "arrow_f1": arr["f1"],
        "tpr": arr["recall"],
        "fdr": 1.0 - arr["precision"],
        "n_edges_learned": learned.n_edges(),
        "n_edges_true": truth.n_edges(),
    }


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve: the chance that a random positive scores above a random
    negative, ties counting one half (the Mann-Whitney U statistic over n_pos * n_neg)."""
    from scipy.stats import rankdata

    values = np.asarray(scores, dtype=float)
    positive = np.asarray(labels, dtype=bool)
    if values.shape != positive.shape or values.ndim != 1:
        raise ValueError(f"scores {values.shape} and labels {positive.shape}: one flat score each")
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if not n_pos or not n_neg:
        raise ValueError(f"AUC needs positives and negatives; got {n_pos} and {n_neg}")
    ranks = rankdata(values)  # ties get their average rank
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))
