"""A site's policy: what its operator lets leave it, one table of keys (Flower-free).

:data:`KEYS` declares every policy key once: its node-config spelling, its type, its default,
what it means and what it refuses. Parsing (:meth:`SitePolicy.from_values`), the words
``federation up`` prints (:func:`describe_policy`), the help texts and the docs table all read it.
A site sets the keys in its SuperNode's node config (``--node-config``) or in a TOML
``policy-file`` that the node config names; a run submitter or coordinator cannot change them.

The defaults are those a hospital's security officer would set for a deployment: only ``hello``'s
metadata, a method's local results (a local graph, votes, p-values) and sums through SecAgg+ leave
a site; a site's own statistics (tables, moments, GLM blocks) leave it per site only with
``allow-plain-statistics``; a privacy budget means the site adds its own noise share unless
``dp-allow-central`` trusts the server's noise. The guard that applies the policy to every message
is :mod:`.site_guard`; the log it writes, :mod:`.audit_log`.

A simulated node (no ``data-path``: it generates its share of a benchmark network from the run
config) holds nothing private and has no policy; the in-process and Ray backends (one machine,
one user) enforce the methods' declarations only.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedcausal_flwr.privacy.site_budget import (
    DP_ALLOW_CENTRAL,
    DP_DELTA,
    DP_EPSILON,
    DP_PERIOD_DAYS,
    DP_PERIOD_EPSILON,
    DP_SHARES,
)


class PolicyConfigError(ValueError):
    """The site's own policy settings are invalid (an unknown key, a wrong value)."""


def _names(value: Any, key: str, where: str) -> frozenset[str]:
    """A comma-separated list (or a TOML array) of names."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
    elif isinstance(value, list | tuple):
        items = [str(v).strip() for v in value]
    else:
        raise PolicyConfigError(
            f"{where}: {key} must be a comma-separated list of names, got {value!r}"
        )
    return frozenset(v for v in items if v)


def _methods(value: Any, key: str, where: str) -> frozenset[str] | None:
    return None if str(value).strip() == "all" else _names(value, key, where)


def _flag(value: Any, key: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise PolicyConfigError(f"{where}: {key} must be true or false, got {value!r}")


def _whole_number(least: int) -> Callable[[Any, str, str], int]:
    def parse(value: Any, key: str, where: str) -> int:
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) < least:
            raise PolicyConfigError(
                f"{where}: {key} must be a whole number >= {least}, got {value!r}"
            )
        return int(text)

    return parse


def _positive(below_one: bool = False) -> Callable[[Any, str, str], float]:
    """A number > 0 (and < 1 with ``below_one``)."""

    def parse(value: Any, key: str, where: str) -> float:
        try:
            number = float(str(value).strip()) if not isinstance(value, bool) else math.nan
        except ValueError:
            number = math.nan
        if not (0 < number < (1 if below_one else math.inf)):
            bounds = "between 0 and 1" if below_one else "a number > 0"
            raise PolicyConfigError(f"{where}: {key} must be {bounds}, got {value!r}")
        return number

    return parse


def _path(value: Any, key: str, where: str) -> str:
    text = str(value).strip()
    if not text or isinstance(value, bool):
        raise PolicyConfigError(f"{where}: {key} is empty; name a file")
    return text


def _participants(value: Any, key: str, where: str) -> int | None:
    """``roster`` (every site of the roster: None) or a whole number >= 2."""
    if str(value).strip() == "roster":
        return None
    return _whole_number(MIN_SECURE_PARTICIPANTS)(value, key, where)


@dataclass(frozen=True)
class PolicyKey:
    """One policy key: its node-config spelling, the :class:`SitePolicy` field it sets, how its
    value is read, its default, what it means and what it refuses (help texts, ``describe``,
    the docs table)."""

    name: str
    field: str
    parse: Callable[[Any, str, str], Any]
    default: Any
    meaning: str
    #: what the site refuses under it
    refuses: str
    #: another key this one needs (it means nothing without it)
    needs: str | None = None


DEFAULT_MAX_LEVELS = 100
#: the most table cells (or GLM block entries) one request may make a site allocate by default:
#: 2**22 int64 cells are 32 MiB
DEFAULT_MAX_REQUEST_CELLS = 2**22
#: a secure round needs at least this many participants: with one, the "sum" is the site's vector
MIN_SECURE_PARTICIPANTS = 2

#: every policy key, once (see the module docstring)
KEYS = (
    PolicyKey("allow-methods", "allow_methods", _methods, None,
              "the methods the site answers (comma-separated, a TOML array, or all)",
              "every message of a method not listed, from hello on"),
    PolicyKey("share-columns", "share_columns", _names, None,
              "the columns of the data file that may enter a run; the others (an identifier, a "
              "free-text note) never reach a client, and the site still takes part",
              "a request naming any other column (key hello); a listed column the file lacks "
              "is the site's own error"),
    PolicyKey("allow-raw-rows", "allow_raw_rows", _flag, False,
              "methods that send the site's rows (the pooled references) may run",
              "every method that declares a raw action, from hello on, so no row leaves"),
    PolicyKey("allow-plain-statistics", "allow_plain_statistics", _flag, False,
              "the site's own statistics (tables, moments, GLM blocks, scores, model steps) may "
              "leave it outside SecAgg+, seen by the server per site",
              "without it: every per_client reply, and every summed reply that does not go "
              "through SecAgg+ (decided by the site's own SecAgg+ module, not by the request)"),
    PolicyKey("require-secure", "require_secure", _flag, False,
              "only hello's metadata and sums through SecAgg+ leave",
              "a run without secure=true (at hello), and every reply but a sum through a SecAgg+ "
              "round of at least 2 sites: no local graph, vote or p-value either"),
    PolicyKey("max-levels", "max_levels", _whole_number(0), DEFAULT_MAX_LEVELS,
              "the most distinct values hello may list for a column",
              "hello for a file with a non-decimal column of more distinct values (an "
              "identifier or free text?), instead of listing them; a request giving a column "
              "more levels (key hello)"),
    PolicyKey("max-request-cells", "max_request_cells", _whole_number(1),
              DEFAULT_MAX_REQUEST_CELLS,
              "the most table cells (or GLM block entries) one request may make the site "
              "allocate; hello reports it, so the project's ServerApp plans within it",
              "a request over it, before anything is allocated"),
    PolicyKey("allow-plugins", "allow_plugins", _names, frozenset(),
              "run-config plugin modules the site imports",
              "importing a module not listed (the coordinator's operator must allow it too)"),
    PolicyKey("audit-log", "audit_log", _path, None,
              "the site's JSON-lines audit log (default: <data file's folder>/<data file's "
              "name>.audit.jsonl)",
              "a reply the site cannot log is not sent"),
    PolicyKey("site-key", "site_key", _path, None,
              "the site's private signing key (fedcausal-flwr federation keys): it signs the "
              "SecAgg+ keys the site advertises", "a key file readable by group or others",
              needs="roster"),
    PolicyKey("roster", "roster", _path, None,
              "the federation's roster: the public keys of the sites this site sums with",
              "without site-key and roster: every secure sum. With them: a secure sum with a "
              "participant whose SecAgg+ keys no roster site signed, a roster site signing for "
              "two participants, a participant called dropped at unmask, or survivors that are "
              "not the verified participants", needs="site-key"),
    PolicyKey("secure-participants", "secure_participants", _participants, None,
              "who a secure sum needs: roster (every site of the roster, the default) or a "
              "number k >= 2 (any k or more of them)",
              "a secure sum without every roster site (roster) or with fewer than k; a secure "
              "sum over other sites than the run's first one (differencing); with k, a sum "
              "short of the whole roster that does not carry the site's own noise share",
              needs="roster"),
    PolicyKey("dp-epsilon", "dp_epsilon", _positive(), None,
              "the site answers only differentially private runs, each spending at most this "
              "epsilon of its rows (docs/privacy.md)",
              "a run without noise on its statistics, or whose planned spending is over "
              "(dp-epsilon, dp-delta), at hello; a reply that would take the run's spending "
              "over it"),
    PolicyKey("dp-delta", "dp_delta", _positive(below_one=True), 1e-6,
              "the delta of dp-epsilon", "as dp-epsilon", needs="dp-epsilon"),
    PolicyKey("dp-period-epsilon", "dp_period_epsilon", _positive(), None,
              "what all runs may spend at this site within dp-period-days (summed from its "
              "audit log)", "a run (at hello) or a reply that would take the window's spending "
              "over it", needs="dp-period-days"),
    PolicyKey("dp-period-days", "dp_period_days", _positive(), None,
              "the window of dp-period-epsilon", "as dp-period-epsilon",
              needs="dp-period-epsilon"),
    PolicyKey("dp-shares", "dp_shares", _whole_number(1), None,
              "how many sites' noise shares (its own included) the site counts on in a run "
              "with dp=distributed (default 1: its own); each release costs it n / dp-shares "
              "times what the run states for n shares",
              "a share that would reach the server outside SecAgg+, or a SecAgg+ round with "
              "fewer participants than it counts on", needs="dp-epsilon"),
    PolicyKey("dp-allow-central", "dp_allow_central", _flag, False,
              "trust the server to add the noise (dp=central: the server holds the noiseless "
              "sum); without it the site adds its own noise share (dp=distributed)",
              "without it: a run whose noise the server adds, at hello, and any statistic "
              "whose charge is not the sites' own shares", needs="dp-epsilon"),
)  # fmt: skip
#: the keys by node-config spelling
KEY = {key.name: key for key in KEYS}
POLICY_KEYS = tuple(KEY)
ALLOW_METHODS = "allow-methods"
SHARE_COLUMNS = "share-columns"
ALLOW_RAW_ROWS = "allow-raw-rows"
ALLOW_PLAIN_STATISTICS = "allow-plain-statistics"
REQUIRE_SECURE = "require-secure"
MAX_LEVELS = "max-levels"
MAX_REQUEST_CELLS = "max-request-cells"
ALLOW_PLUGINS = "allow-plugins"
AUDIT_LOG = "audit-log"
SITE_KEY = "site-key"
ROSTER = "roster"
SECURE_PARTICIPANTS = "secure-participants"
assert set(POLICY_KEYS) == {
    ALLOW_METHODS, SHARE_COLUMNS, ALLOW_RAW_ROWS, ALLOW_PLAIN_STATISTICS, REQUIRE_SECURE,
    MAX_LEVELS, MAX_REQUEST_CELLS, ALLOW_PLUGINS, AUDIT_LOG, SITE_KEY, ROSTER,
    SECURE_PARTICIPANTS, DP_EPSILON, DP_DELTA, DP_PERIOD_EPSILON, DP_PERIOD_DAYS, DP_SHARES,
    DP_ALLOW_CENTRAL,
}  # fmt: skip
#: the keys whose value is a file of the site's (a refusal says whether one is set, not where)
FILE_KEYS = frozenset({AUDIT_LOG, SITE_KEY, ROSTER})
#: the keys whose refusal means "this release would cross the site's privacy budget": a run ends
#: its search there with what it has (the other refusals stop it with an error)
BUDGET_KEYS = frozenset({DP_EPSILON, DP_PERIOD_EPSILON})
#: the keys whose refusal ends a search with what it has, not the run: a budget, or a secure sum
#: without every site of the roster (after a dropout)
SEARCH_ENDING_KEYS = BUDGET_KEYS | {SECURE_PARTICIPANTS}
POLICY_FILE = "policy-file"
#: every key a SuperNode's node config may hold (the data keys, the policy keys, the policy file)
NODE_CONFIG_KEYS = (
    "partition-id",
    "num-partitions",
    "data-path",
    "data-sep",
    "data-keep-index",
    "data-cache",
    POLICY_FILE,
    *POLICY_KEYS,
)


@dataclass(frozen=True)
class SitePolicy:
    """What a site lets leave it: one field per :data:`KEYS` entry, each with its safe
    default (see the table for what each means)."""

    allow_methods: frozenset[str] | None = None
    share_columns: frozenset[str] | None = None
    allow_raw_rows: bool = False
    allow_plain_statistics: bool = False
    require_secure: bool = False
    max_levels: int = DEFAULT_MAX_LEVELS
    max_request_cells: int = DEFAULT_MAX_REQUEST_CELLS
    allow_plugins: frozenset[str] = frozenset()
    audit_log: str | None = None
    site_key: str | None = None
    roster: str | None = None
    secure_participants: int | None = None
    dp_epsilon: float | None = None
    dp_delta: float = 1e-6
    dp_period_epsilon: float | None = None
    dp_period_days: float | None = None
    dp_shares: int | None = None
    dp_allow_central: bool = False

    @classmethod
    def from_values(cls, values: Mapping[str, Any], where: str) -> SitePolicy:
        """The policy of ``values`` keyed by :data:`POLICY_KEYS` (unknown keys are errors)."""
        unknown = sorted(set(values) - set(POLICY_KEYS))
        if unknown:
            raise PolicyConfigError(
                f"{where}: unknown policy key {unknown[0]!r}; the keys are {', '.join(POLICY_KEYS)}"
            )
        for name in values:
            needs = KEY[name].needs
            if needs is not None and needs not in values:
                raise PolicyConfigError(f"{where}: {name} needs {needs}")
        if values.get(REQUIRE_SECURE) is not None and values.get(ALLOW_PLAIN_STATISTICS):
            if _flag(values[REQUIRE_SECURE], REQUIRE_SECURE, where) and _flag(
                values[ALLOW_PLAIN_STATISTICS], ALLOW_PLAIN_STATISTICS, where
            ):
                raise PolicyConfigError(
                    f"{where}: {REQUIRE_SECURE} and {ALLOW_PLAIN_STATISTICS} are both true; "
                    "choose one"
                )
        return cls(**{KEY[n].field: KEY[n].parse(v, n, where) for n, v in values.items()})

    @classmethod
    def of_node(cls, node_config: Mapping[str, Any]) -> SitePolicy | None:
        """The policy of a SuperNode's node config (a ``policy-file`` TOML and/or the keys
        themselves; a key set in both is an error), or None for a simulated node (neither a
        ``data-path`` nor a policy key: it holds no data of its own)."""
        keys = set(node_config)
        if "data-path" not in keys and not keys & {POLICY_FILE, *POLICY_KEYS}:
            return None
        unknown = sorted(keys - set(NODE_CONFIG_KEYS))
        if unknown:
            raise PolicyConfigError(
                f"node config key {unknown[0]!r} is unknown; the keys are "
                f"{', '.join(NODE_CONFIG_KEYS)}"
            )
        values = {k: node_config[k] for k in POLICY_KEYS if k in node_config}
        if POLICY_FILE in node_config:
            path = Path(str(node_config[POLICY_FILE]))
            try:
                from_file = tomllib.loads(path.read_text(encoding="utf-8"))
            except OSError as err:
                raise PolicyConfigError(
                    f"{POLICY_FILE} {str(path)!r} cannot be read ({err.strerror})"
                ) from None
            except tomllib.TOMLDecodeError as err:
                raise PolicyConfigError(f"{POLICY_FILE} {str(path)!r} is not TOML: {err}") from None
            both = sorted(set(from_file) & set(values))
            if both:
                raise PolicyConfigError(
                    f"policy key {both[0]!r} is set both in the node config and in "
                    f"{POLICY_FILE} {str(path)!r}; set it in one place"
                )
            policy = cls.from_values({**from_file, **values}, f"{POLICY_FILE} {str(path)!r}")
        else:
            policy = cls.from_values(values, "node config")
        if policy.audit_log is None and "data-path" in node_config:
            return policy.with_audit_log(default_audit_log(str(node_config["data-path"])))
        return policy

    def with_audit_log(self, path: str) -> SitePolicy:
        return dataclasses.replace(self, audit_log=path)


def default_audit_log(data_path: str) -> str:
    """Where a site's audit log goes when its policy names none: beside its data file, named
    after it (``/data/site0.csv`` -> ``/data/site0.audit.jsonl``)."""
    path = Path(data_path)
    return str(path.with_name(path.stem + ".audit.jsonl"))


def plugin_names(plugins: str) -> list[str]:
    """The module names of a run config's comma-separated ``plugins``."""
    return [name.strip() for name in str(plugins).split(",") if name.strip()]


def plugin_problem(policy: SitePolicy | None, plugins: str, site: int) -> str | None:
    """Why a site does not import a run config's plugin modules (None: it may): its policy must
    name each one (a node without a policy, i.e. a simulated one, imports them)."""
    if policy is None:
        return None
    refused = [p for p in plugin_names(plugins) if p not in policy.allow_plugins]
    if not refused:
        return None
    allowed = ", ".join(sorted(policy.allow_plugins)) or "none"
    return (
        f"site {site} refuses to import plugin module {refused[0]!r}: its policy "
        f"{ALLOW_PLUGINS} allows {allowed}"
    )


def in_words(key: PolicyKey, value: Any) -> str:
    """A key's setting in words (``describe``, and a refusal's reason)."""
    if key.name == DP_EPSILON and value is None:
        return "none (no privacy budget)"
    if key.name == SECURE_PARTICIPANTS and value is None:
        return "roster (every site of the roster)"
    if value is None:
        return {ALLOW_METHODS: "all", SHARE_COLUMNS: "every column", AUDIT_LOG:
                "beside the data file", DP_SHARES: "1 (its own)"}.get(key.name, "none")  # fmt: skip
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, frozenset):
        return ", ".join(sorted(value)) or "none"
    return f"{value:g}" if isinstance(value, float) else str(value)


def describe_policy(policy: SitePolicy) -> list[str]:
    """The policy in words, one line per key (for ``federation up`` and the docs); the privacy
    keys only when the site sets a budget."""
    return [
        f"{key.name}: {in_words(key, getattr(policy, key.field))}"
        for key in KEYS
        if policy.dp_epsilon is not None or not key.name.startswith("dp-") or key.name == DP_EPSILON
    ]


def policy_help() -> str:
    """Every key and its meaning, for help texts."""
    return "; ".join(f"{key.name}: {key.meaning}" for key in KEYS)


def policy_markdown() -> str:
    """The docs' table of policy keys (docs/deploy.md holds it as this function writes it)."""
    rows = ["| key | default | what it means | what it refuses |", "|---|---|---|---|"]
    for key in KEYS:
        default = in_words(key, key.default)
        rows.append(f"| `{key.name}` | {default} | {key.meaning} | {key.refuses} |")
    return "\n".join(rows) + "\n"
