"""Options several methods declare alike (CI level, test, depth, reliability, seed, FCI engine,
the DAG vote).

Each method's :class:`~fedcausal_flwr.options.OptionSet` is written next to its strategy from these
builders, with the method's own default and the paper's value where the paper gives one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fedcausal_flwr.discovery.bootstrap import TIE_RULES
from fedcausal_flwr.discovery.edge_rounds import EDGE_TESTS
from fedcausal_flwr.discovery.pc import COLLIDER_RULES, knowledge_supported
from fedcausal_flwr.graphs.knowledge import Knowledge
from fedcausal_flwr.options import Option, content_only, say, seed_option, spell

DISCRETE_TESTS = ("chi2", "g2")
POSSIBLE_DSEP = ("sequential", "stable", "off")
FCI_RULES = ("zhang", "causallearn")


def alpha(default: float = 0.05, paper: str = "") -> Option:
    return Option(
        "alpha",
        "float",
        default,
        "significance level of every CI test",
        minimum=0.0,
        maximum=1.0,
        min_exclusive=True,
        max_exclusive=True,
        paper=paper,
    )


def test(
    default: str = "chi2", choices: tuple[str, ...] = DISCRETE_TESTS, paper: str = ""
) -> Option:
    return Option(
        "test",
        "str",
        default,
        "CI test: Pearson chi2, G2 (likelihood ratio)"
        + (", Fisher-z on Gaussian data" if "fisherz" in choices else ""),
        choices=choices,
        paper=paper,
    )


def max_depth(
    default: int | None = None, help: str = "largest conditioning set", paper: str = ""
) -> Option:
    return Option(
        "max_depth",
        "int",
        default,
        help,
        minimum=0,
        nullable=True,
        null_values=(-1,),
        null_meaning="no cap",
        paper=paper,
    )


def reliability(default: float | None = None, paper: str = "") -> Option:
    return Option(
        "reliability",
        "float",
        default,
        "run a test only with at least this many rows per table cell (n / (a_x a_y prod a_s), "
        "Causal Learner's rule); otherwise it counts as dependent",
        minimum=0.0,
        nullable=True,
        null_values=(0,),
        null_meaning="off",
        paper=paper,
    )


def seed(help: str) -> Option:
    return seed_option(help)


def ratio(default: float, paper: str = "") -> Option:
    return Option(
        "ratio",
        "float",
        default,
        "keep an edge with votes >= ratio * K (exact decimal comparison)",
        minimum=0.0,
        maximum=1.0,
        min_exclusive=True,
        paper=paper,
    )


def collider_rule() -> Option:
    return Option(
        "collider_rule",
        "str",
        "causallearn",
        "PC's collider rule: causal-learn 0.1.4.8's (uc_rule=0, uc_priority=2), the textbook rule, "
        "conservative or majority PC",
        choices=COLLIDER_RULES,
    )


def pds_max_size() -> Option:
    return Option(
        "pds_max_size",
        "int",
        None,
        "largest Possible-D-Sep conditioning set",
        minimum=0,
        nullable=True,
        null_values=(-1,),
        null_meaning="no cap",
    )


def fci_engine() -> tuple[Option, ...]:
    """FCI's background knowledge, Possible-D-Sep phase and rule set."""
    return (
        knowledge(),
        Option(
            "possible_dsep",
            "str",
            "sequential",
            "FCI's Possible-D-Sep removal phase (sequential as causal-learn, order-independent "
            "stable, or off)",
            choices=POSSIBLE_DSEP,
        ),
        pds_max_size(),
        Option(
            "fci_rules",
            "str",
            "zhang",
            "FCI orientation rules: Zhang (2008) without selection bias, or causal-learn's set "
            "(R5-R7, R4 with two extra tests)",
            choices=FCI_RULES,
        ),
    )


def fci_engine_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """The FCI engine keywords (:func:`~fedcausal_flwr.discovery.fci.fci_steps`) of resolved
    method options."""
    return {
        "possible_dsep": values["possible_dsep"],
        "pds_max_size": values["pds_max_size"],
        "rules": values["fci_rules"],
        "knowledge": parse_knowledge(values.get("knowledge")),
    }


KNOWLEDGE_WORDS = ("forbidden", "required", "tier")
#: how a run config gives knowledge: its statements, inline
KNOWLEDGE_INLINE = "knowledge='forbidden A -> B; tier C D'"


def knowledge_text(value: Any, entry_point: str = "python") -> str:
    """The ``knowledge`` option's value: a :class:`Knowledge`, statements in the file format
    (``;`` may separate them) or, on the user's own entry points, a file's path; checked and kept
    as the format's text, so what travels on is content.

    From a run config (``entry_point`` ``config``) only statements are taken: anything else is
    refused without touching the file system, and no error quotes the value or its lines (every
    site and the coordinator resolve the run config; see :func:`content_only`).
    """
    inline = entry_point == "config"
    if isinstance(value, Knowledge):
        return value.to_text()
    if not isinstance(value, str):
        got = type(value).__name__ if inline else repr(value)
        raise ValueError(f"expected a knowledge file, statements or a Knowledge, got {got}")
    text = value.strip()
    if not text:
        return ""  # no statements (what a file of comments resolves to)
    if text.split(maxsplit=1)[0].lower() in KNOWLEDGE_WORDS:
        statements = text.replace(";", "\n")  # line n of an error: the n-th statement
        return Knowledge.parse(statements, source="knowledge", quote=not inline).to_text()
    if inline:
        raise ValueError(content_only("the knowledge statements", KNOWLEDGE_INLINE))
    return Knowledge.read(text).to_text()


def knowledge() -> Option:
    return Option(
        "knowledge",
        "str",
        None,
        "background knowledge (docs/knowledge.md): its statements ('forbidden A -> B; required C "
        "-> D; tier E F; tier G'), or a file of them where the user runs (a run config carries "
        "the statements): pairs forbidden both ways are never tested, required edges never tested "
        "nor removed, and no orientation goes against it",
        nullable=True,
        null_meaning="none",
        paper="none (the papers take no background knowledge)",
        convert=knowledge_text,
        local_file=True,
    )


def pc_engine() -> tuple[Option, ...]:
    """PC's orientation options, with causal-learn 0.1.4.8's codes and meanings."""
    return (
        knowledge(),
        collider_rule(),
        Option(
            "uc_rule",
            "int",
            0,
            "causal-learn's uc_rule: 0 separating sets (collider_rule decides), 1 maxP, "
            "2 definiteMaxP (1 and 2 ask the p-values of every candidate separating set of the "
            "unshielded triples: one more round; capped at max_depth variables if set)",
            minimum=0,
            maximum=2,
        ),
        Option(
            "uc_priority",
            "int",
            2,
            "causal-learn's uc_priority for conflicting colliders: 0 overwrite, 1 bi-directed, "
            "2 existing first, 3 stronger first, 4 stronger* first, -1 the uc_rule's own default "
            "(3; 4 for uc_rule 2); 3 and 4 ask one more round of tests",
            minimum=-1,
            maximum=4,
        ),
        Option(
            "stable",
            "bool",
            True,
            "PC-stable skeleton; false: causal-learn's order-dependent skeleton (nodes in column "
            "order on the live graph: the result depends on the column order; same rounds)",
        ),
        Option(
            "edge_tests",
            "str",
            "all",
            "how a skeleton depth asks its tests: all of them in one round (causal-learn's "
            "record: every separating set), or until-removed: each edge's sets in rounds of 1, "
            "2, 4, ... until one separates it, members most dependent on both ends (at depth 0) "
            "first, then the rest of the removal depth for the pairs of unshielded triples: the "
            "same CPDAG from far fewer tests on big networks, in more rounds; other removed pairs "
            "record the separating sets they asked",
            choices=EDGE_TESTS,
        ),
    )


def search_engine_problem(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rules of the search's orientation: PC's causal-learn pairs only, and
    background knowledge only with rules that never overwrite it."""
    if values.get("knowledge") and values.get("fci_rules", "zhang") != "zhang":
        return (
            f"{spell('knowledge', entry_point)} works with FCI's Zhang rules "
            f"({say('fci_rules', 'zhang', entry_point)}), which never overwrite a mark; "
            f"causal-learn's rule set ({say('fci_rules', values['fci_rules'], entry_point)}) does"
        )
    if "uc_rule" not in values:
        return None
    if values["edge_tests"] != "all" and not values["stable"]:
        return (
            f"{say('edge_tests', values['edge_tests'], entry_point)} asks PC-stable's depths; "
            f"{say('stable', False, entry_point)} reads every test of a depth in column order: "
            f"use {say('stable', True, entry_point)}"
        )
    rule, priority = values["uc_rule"], values["uc_priority"]
    if rule != 0 and values["collider_rule"] != "causallearn":
        return (
            f"{say('uc_rule', rule, entry_point)} decides colliders by p-values, not by separating "
            f"sets: it takes {say('collider_rule', 'causallearn', entry_point)}"
        )
    if rule == 2 and priority in (0, 1):
        return (
            f"{say('uc_rule', 2, entry_point)} (definiteMaxP) takes uc_priority -1, 2, 3 or 4, not "
            f"{say('uc_priority', priority, entry_point)} (causal-learn's definite_maxp has no "
            "overwrite or bi-directed policy)"
        )
    if values.get("knowledge") and not knowledge_supported(values["collider_rule"], rule, priority):
        return (
            f"{spell('knowledge', entry_point)} works with the separating-set colliders "
            f"({say('collider_rule', 'causallearn', entry_point)} or standard, uc_rule 0, "
            f"uc_priority 0-2), not with "
            f"{say('collider_rule', values['collider_rule'], entry_point)}, "
            f"{say('uc_rule', rule, entry_point)}, {say('uc_priority', priority, entry_point)}"
        )
    return None


def search_engine(algorithm: str) -> tuple[Option, ...]:
    """The server-side search's options: PC's orientation, or FCI's engine."""
    return pc_engine() if algorithm == "pc" else fci_engine()


def search_engine_options(algorithm: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The search engine keywords of resolved options (see :func:`search_engine`)."""
    if algorithm == "pc":
        keys = ("collider_rule", "uc_rule", "uc_priority", "stable", "edge_tests")
        knowledge = parse_knowledge(values.get("knowledge"))
        return {**{key: values[key] for key in keys}, "knowledge": knowledge}
    return fci_engine_options(values)


def parse_knowledge(text: str | None) -> Knowledge | None:
    """The ``knowledge`` option's text (checked when the option was resolved) as knowledge."""
    return Knowledge.parse(text, source="knowledge") if text else None


def fisherz_needs_exact(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: the Gaussian test sums float moments, which only exact mode carries."""
    if values.get("test") == "fisherz" and values.get("ci", "exact") != "exact":
        return (
            f"{say('ci', values['ci'], entry_point)} needs discrete data: the Fisher-z test sums "
            f"float moments, which the sketch cannot carry; use {say('ci', 'exact', entry_point)}"
        )
    return None


def sketch_needs_chi2(values: Mapping[str, Any], entry_point: str) -> str | None:
    if values.get("ci") == "sketch" and values.get("test") != "chi2":
        return (
            f"the sketch estimates Pearson's chi2: use {say('test', 'chi2', entry_point)} with "
            f"{say('ci', 'sketch', entry_point)}"
        )
    return None


def empty_strata_add_dof(**changes: Any) -> Option:
    """The FedC2SL code's degrees of freedom as an option, with a method's ``changes``
    (``requires``, ``paper``, ``why``)."""
    help = (
        "add one degree of freedom per empty stratum, as the FedC2SL code does "
        "(default: causal-learn's count)"
    )
    return Option("empty_strata_add_dof", "bool", False, help, **changes)


MISSING_MODES = ("error", "testwise", "listwise")


def missing() -> Option:
    return Option(
        "missing",
        "str",
        "error",
        "what a missing value (an empty CSV field, NA, NaN) does: error refuses it, naming the "
        "client and column; testwise: each CI test uses the rows complete on its variables (the "
        "federated test equals the pooled test-wise-deletion test); listwise: each client drops "
        "its incomplete rows first",
        choices=MISSING_MODES,
        paper="complete data (the papers do not treat missing values)",
        why="a gap in the data is refused unless the user chooses how to delete it",
    )


#: The DAG vote and BDeu hill climbing of FedECD and FedCSL (one code base, the same defaults; a
#: method may reword an option's help or paper note for its paper)
DAG_VOTE: tuple[Option, ...] = (
    Option(
        "tie_rule",
        "str",
        "undirected",
        "a direction vote tie: leave the edge undirected (order-independent), or make the lower "
        "(paper) or higher (code) index the parent",
        choices=TIE_RULES,
        paper="lower_parent (Eq. 9); higher_parent in the code",
        why="both index rules make the graph depend on the column order "
        "(experiments/fedecd_order.py)",
    ),
    Option(
        "allow_cycles",
        "bool",
        False,
        "keep directed cycles of the voted graph (false: drop the weakest-voted edge on each)",
        paper="true (the paper does not remove cycles)",
        why="the result is a DAG-kind graph; a directed cycle is no DAG",
    ),
    Option(
        "ess",
        "float",
        10.0,
        "BDeu equivalent sample size",
        minimum=0.0,
        min_exclusive=True,
        paper="10 in the code",
    ),  # fmt: skip
    Option(
        "structure_prior",
        "bool",
        True,
        "add the reference's ln(1 / (ESS + 1)) per parent to the BDeu score",
        paper="true in the code",
    ),
    Option(
        "tabu_length",
        "int",
        100,
        "tabu list length of the hill climbing",
        minimum=0,
        paper="100 in the code",
    ),  # fmt: skip
    Option(
        "max_barren",
        "int",
        15,
        "stop the hill climbing after this many moves without improvement",
        minimum=0,
        paper="15 in the code",
    ),
    Option(
        "lower_triangle_compat",
        "bool",
        False,
        "emulate the code's lower-triangle search space quirk (CPM)",
        paper="true in the code",
        why="the quirk forbids half of the orientations; kept for reproducing the code",
    ),
)


def dag_vote_option(name: str, **changes: Any) -> Option:
    """One of :data:`DAG_VOTE`, with ``changes`` (help, paper, why) for a method's paper."""
    (option,) = [o for o in DAG_VOTE if o.name == name]
    return replace(option, **changes)


#: the BDeu hill climbing's options among :data:`DAG_VOTE` (as its requests carry them)
HILL_CLIMB = ("ess", "structure_prior", "tabu_length", "max_barren", "lower_triangle_compat")


def hill_climb_keywords(values: Mapping[str, Any]) -> dict[str, Any]:
    """The BDeu hill climbing's keywords (:data:`HILL_CLIMB`) of resolved options."""
    return {key: values[key] for key in HILL_CLIMB}


# ---------------------------------------------------------------- differential privacy
DP_MODES = ("off", "central", "distributed")


def _epsilon(value: Any) -> float:
    """A positive number, or ``inf`` (no noise)."""
    if isinstance(value, str) and value.strip().lower() in ("inf", "infinity"):
        return float("inf")
    if isinstance(value, bool):
        raise ValueError(f"expected a number > 0 or inf, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number > 0 or inf, got {value!r}") from None
    if not number > 0:  # NaN too
        raise ValueError(f"expected a number > 0 or inf, got {value!r}")
    return number


#: dp_batches none (FedPC/FedFCI's default): no even split and no depth cap (on ALARM x 100k x 10
#: sites at epsilon 8, 0.957 of the uncapped exact run's adjacency F1, where an even split over 2
#: depths kept 0.728; experiments/README.md)
HALVING_MEANING = (
    "each depth spends half of the budget left, and the search goes as deep as it would without "
    "privacy"
)


def dp_options(batches: int | None = None) -> tuple[Option, ...]:
    """Differential privacy of the summed tables (:mod:`fedcausal_flwr.privacy.accounting`);
    ``batches``: the method's default ``dp_batches`` (None: each depth spends half of what is
    left, for a method whose depths are one release each)."""
    return (
        Option(
            "dp",
            "str",
            "off",
            "differential privacy of the summed tables: off; central (the server adds discrete "
            "Gaussian noise to each batch's sum: the server is trusted with the sum); or "
            "distributed (each site adds its share of the noise before SecAgg+ sums the tables: "
            "the server only sees the noisy sum; needs a secure run)",
            choices=DP_MODES,
            paper="none (no method here states a formal privacy guarantee)",
        ),
        Option(
            "dp_epsilon",
            "float",
            1.0,
            "the run's privacy target epsilon (inf: no noise) at dp_delta, for one row at one site",
            convert=_epsilon,
            requires=("dp", ("central", "distributed")),
        ),
        Option(
            "dp_delta",
            "float",
            1e-6,
            "the run's privacy target delta",
            minimum=0,
            maximum=1,
            min_exclusive=True,
            max_exclusive=True,
            requires=("dp", ("central", "distributed")),
        ),
        Option(
            "dp_batches",
            "int",
            batches,
            "batches of tables the privacy budget is split over evenly: the skeleton search "
            "stops at depth dp_batches - 1 (as --max-depth would)",
            minimum=1,
            nullable=batches is None,
            null_meaning=HALVING_MEANING if batches is None else "",
            requires=("dp", ("central", "distributed")),
        ),
        Option(
            "dp_noise_seed",
            "int",
            None,
            "seed of the server's noise, for simulation studies only: a known seed lets anyone "
            "remove the noise (default none: fresh randomness from the operating system; "
            "distributed noise is always the sites' own)",
            nullable=True,
            minimum=0,
            requires=("dp", ("central",)),
        ),
    )


def dp_needs_exact_tables(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: noise goes on summed contingency tables, batch by batch, so the other
    statistics and the searches that ask tests after the skeleton are not covered."""
    if values.get("dp", "off") == "off":
        return None
    dp = say("dp", values["dp"], entry_point)
    if values.get("ci") != "exact" or values.get("test") != "chi2":
        return (
            f"{dp} adds noise to summed contingency tables and tests them with Pearson's chi2, "
            f"each cell's variance counting the noise: it needs {say('ci', 'exact', entry_point)} "
            f"and {say('test', 'chi2', entry_point)}"
        )
    return dp_covers_the_skeleton_only(values, entry_point)


def dp_covers_the_skeleton_only(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: the noise is paid for batch by batch over the skeleton's depths, so
    the searches that ask tests after the skeleton are refused with ``dp``."""
    if values.get("dp", "off") == "off":
        return None
    dp = say("dp", values["dp"], entry_point)
    later = [
        say(name, values[name], entry_point)
        for name, fine in (
            ("collider_rule", ("causallearn", "standard")),
            ("uc_rule", (0,)),
            ("uc_priority", (0, 1, 2)),
            ("edge_tests", ("all",)),
            ("possible_dsep", ("off",)),
            ("fci_rules", ("zhang",)),
        )
        if name in values and values[name] not in fine
    ]
    if later:
        return (
            f"{dp} covers the skeleton's batches only; {', '.join(later)} would ask tests after "
            "them: use the defaults of the separating-set colliders (and, for FCI, "
            f"{say('possible_dsep', 'off', entry_point)})"
        )
    return None
