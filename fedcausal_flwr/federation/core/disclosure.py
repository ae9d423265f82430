"""What each client action discloses: the five classes a method declares its actions with.

Every registered method declares, once and next to its options, the class of each action its
clients answer (``register_method(..., disclosures={TABLES: SUM, ...})``):

* ``raw``: the site's rows themselves (the pooled references only);
* ``per_client``: a statistic of this site alone that the server sees as such (tables, moments,
  GLM blocks, scores, model steps): what a site's own rows add up to;
* ``local_result``: the result of an analysis the site ran on its own rows (a local graph,
  votes, p-values, per-edge evidence): what a method sends instead of statistics;
* ``summed``: only the sum over the sites is needed; in a secure run it goes through SecAgg+, so
  the server sees the sum only (in a plain run it still sees each site's values);
* ``metadata``: the built-in ``hello`` (columns, dtypes, level sets, row counts, a fingerprint,
  and the names of columns a test cannot separate: :mod:`fedcausal_flwr.data.dependence`).

A client answers only the actions its method declares (:class:`~.site_policy.SiteGuard`); a site's
policy says which classes it lets leave (:class:`~.site_policy.SitePolicy`). Flower-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fedcausal_flwr.federation.core.messages import BOOTSTRAP, HELLO

RAW = "raw"
PER_CLIENT = "per_client"
LOCAL = "local_result"
SUM = "summed"
METADATA = "metadata"
#: the classes, least revealing first (a message holding several is charged the last one)
CLASSES = (METADATA, SUM, LOCAL, PER_CLIENT, RAW)
#: what each class means, for listings and the docs
MEANING = {
    RAW: "the site's rows",
    PER_CLIENT: "this site's own statistics, seen by the server as such",
    LOCAL: "the result of this site's own analysis (a local graph, votes, p-values)",
    SUM: "summed over the sites (through SecAgg+ in a secure run; per site otherwise)",
    METADATA: (
        "columns, dtypes, level sets, row counts, a data fingerprint and the names of columns a "
        "test cannot separate"
    ),
}


def declare(owner: str, disclosures: Mapping[str, str] | None) -> dict[str, str]:
    """A method's declaration checked: every action named once with one of :data:`CLASSES`
    (``hello`` and ``bootstrap`` are built in and may not be declared)."""
    out: dict[str, str] = {}
    for action, kind in (disclosures or {}).items():
        if not isinstance(action, str) or not action:
            raise ValueError(f"{owner}: an action name must be a non-empty string, got {action!r}")
        if action in (HELLO, BOOTSTRAP):
            raise ValueError(f"{owner}: action {action!r} is built in; do not declare it")
        if kind not in CLASSES:
            raise ValueError(
                f"{owner}: action {action!r} has disclosure class {kind!r}; "
                f"choose one of {', '.join(CLASSES)}"
            )
        out[action] = kind
    return dict(sorted(out.items()))


def summed_actions(disclosures: Mapping[str, str]) -> list[str]:
    """The actions a declaration says only their sum is needed of: a run records them, so what
    it says the server held is read from the declaration and what the run did
    (:mod:`fedcausal_flwr.server_held`)."""
    return sorted(action for action, kind in disclosures.items() if kind == SUM)


def most_revealing(kinds: Iterable[str]) -> str:
    """The most revealing of ``kinds`` (``metadata`` for none)."""
    return max(kinds, key=CLASSES.index, default=METADATA)


def discloses_raw(disclosures: Mapping[str, str]) -> bool:
    """Whether a declaration sends any site's rows."""
    return RAW in disclosures.values()
