"""A site decides what leaves it: its policy, the guard every reply passes, and its audit log.

Three parts, all on the site's side and Flower-free:

* :class:`SitePolicy`: what the site's operator allows, read from the SuperNode's own node config
  (``--node-config``) or a TOML ``policy-file`` it names; a run submitter cannot change it.
  Keys (node-config spelling): ``allow-methods``, ``allow-raw-rows``, ``require-secure``,
  ``max-levels``, ``allow-plugins``, ``audit-log``, and the privacy budget's ``dp-*`` keys (see
  :data:`POLICY_KEYS`).
* :class:`SiteGuard`: built with each client from its method's declared disclosures
  (:mod:`.disclosure`) and, at a site, its policy. A client answers only the actions its method
  declares, and only what the policy allows; anything else is a :class:`PolicyRefusal` (a typed
  refusal naming the site and the policy key: the server stops the run).
* :class:`AuditLog`: one JSON line per reply the site sends and per refusal (time, run, method,
  action, disclosure class, whether it went through SecAgg+, arrays' shapes and dtypes, bytes,
  metadata keys, the privacy charge of a differentially private release, the policy key of a
  refusal), appended to a file the site chooses.
  ``fedcausal-flwr audit LOG`` summarises it (:mod:`fedcausal_flwr.audit`).

A simulated node (no ``data-path``: it generates its share of a benchmark network from the run
config) holds nothing private and has no policy; the in-process and Ray backends (one machine,
one user) enforce the declarations only.
"""

from __future__ import annotations

import calendar
import dataclasses
import json
import math
import os
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeGuard

import numpy as np

from fedcausal_flwr.federation.core.disclosure import (
    METADATA,
    PER_CLIENT,
    RAW,
    SUM,
    discloses_raw,
    most_revealing,
)
from fedcausal_flwr.federation.core.messages import BOOTSTRAP, HELLO, UNKNOWN_CLIENT, ProtocolError
from fedcausal_flwr.protocols.records import MalformedPayload, PrivacyCharge, PrivacyPlan
from fedcausal_flwr.stats.privacy import release_rho, release_sensitivity2, rho_for

ALLOW_METHODS = "allow-methods"
ALLOW_RAW_ROWS = "allow-raw-rows"
REQUIRE_SECURE = "require-secure"
MAX_LEVELS = "max-levels"
ALLOW_PLUGINS = "allow-plugins"
AUDIT_LOG = "audit-log"
DP_EPSILON = "dp-epsilon"
DP_DELTA = "dp-delta"
DP_PERIOD_EPSILON = "dp-period-epsilon"
DP_PERIOD_DAYS = "dp-period-days"
DP_SHARES = "dp-shares"
DP_REQUIRE_DISTRIBUTED = "dp-require-distributed"
#: the keys whose refusal means "this release would cross the site's privacy budget": a run ends
#: its search there with what it has (the other refusals stop it with an error)
BUDGET_KEYS = frozenset({DP_EPSILON, DP_PERIOD_EPSILON})
#: the privacy keys that only mean something beside a per-run cap
NEED_DP_EPSILON = (DP_DELTA, DP_PERIOD_EPSILON, DP_PERIOD_DAYS, DP_SHARES, DP_REQUIRE_DISTRIBUTED)
POLICY_FILE = "policy-file"
#: the policy keys a site sets (node config, or a policy file)
POLICY_KEYS = (
    ALLOW_METHODS,
    ALLOW_RAW_ROWS,
    REQUIRE_SECURE,
    MAX_LEVELS,
    ALLOW_PLUGINS,
    AUDIT_LOG,
    DP_EPSILON,
    DP_DELTA,
    DP_PERIOD_EPSILON,
    DP_PERIOD_DAYS,
    DP_SHARES,
    DP_REQUIRE_DISTRIBUTED,
)
#: every key a SuperNode's node config may hold (the data keys, the policy keys, the policy file)
NODE_CONFIG_KEYS = (
    "partition-id",
    "num-partitions",
    "data-path",
    "data-sep",
    "data-keep-index",
    POLICY_FILE,
    *POLICY_KEYS,
)
DEFAULT_MAX_LEVELS = 100
#: the refusal key of an action the method does not declare (no policy can allow it)
UNDECLARED = "declared disclosures"
#: a secure round needs at least this many participants: with one, the "sum" is the site's vector
MIN_SECURE_PARTICIPANTS = 2


class PolicyRefusal(ProtocolError):
    """A site refuses a message: its method does not declare the action, or the site's policy
    does not allow it (``key`` names the policy key, or :data:`UNDECLARED`)."""

    def __init__(self, client: int, key: str, message: str):
        super().__init__(client, message)
        self.key = key


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


def _positive(value: Any, key: str, where: str, below_one: bool = False) -> float:
    """A number > 0 (and < 1 with ``below_one``)."""
    try:
        number = float(str(value).strip()) if not isinstance(value, bool) else math.nan
    except ValueError:
        number = math.nan
    if not (0 < number < (1 if below_one else math.inf)):
        bounds = "between 0 and 1" if below_one else "a number > 0"
        raise PolicyConfigError(f"{where}: {key} must be {bounds}, got {value!r}")
    return number


def _flag(value: Any, key: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise PolicyConfigError(f"{where}: {key} must be true or false, got {value!r}")


@dataclass(frozen=True)
class SitePolicy:
    """What a site lets leave it (see the module docstring; every field has a safe default).

    ``allow_methods``: the methods it answers (None: every registered method); raw rows leave only
    with ``allow_raw_rows``; ``require_secure``: only ``hello``'s metadata and sums through
    SecAgg+ leave (every per-client statistic and every sum outside SecAgg+ is refused);
    ``max_levels``: the most distinct values of a column that ``hello`` may disclose (a column
    with more is refused, not truncated); ``allow_plugins``: run-config plugin modules this site
    imports; ``audit_log``: the site's JSONL log (None: beside its data file). ``dp_epsilon``:
    the site answers only differentially private runs (a noise charge on every statistic), each
    spending at most ``(dp_epsilon, dp_delta)`` of its rows; ``dp_period_epsilon`` caps what all
    runs spend within the last ``dp_period_days`` days, as its audit log records it (None: no
    budget); ``dp_shares``: in a run with distributed noise, how many sites' noise shares (its own
    included) the site counts on (None: 1, its own only, when it sets a budget);
    ``dp_require_distributed``: the site answers only runs whose noise the sites add themselves
    (the server never holds a noiseless sum of its rows), never the server's own noise."""

    allow_methods: frozenset[str] | None = None
    allow_raw_rows: bool = False
    require_secure: bool = False
    max_levels: int = DEFAULT_MAX_LEVELS
    allow_plugins: frozenset[str] = frozenset()
    audit_log: str | None = None
    dp_epsilon: float | None = None
    dp_delta: float = 1e-6
    dp_period_epsilon: float | None = None
    dp_period_days: float | None = None
    dp_shares: int | None = None
    dp_require_distributed: bool = False

    @classmethod
    def from_values(cls, values: Mapping[str, Any], where: str) -> SitePolicy:
        """The policy of ``values`` keyed by :data:`POLICY_KEYS` (unknown keys are errors)."""
        unknown = sorted(set(values) - set(POLICY_KEYS))
        if unknown:
            raise PolicyConfigError(
                f"{where}: unknown policy key {unknown[0]!r}; the keys are {', '.join(POLICY_KEYS)}"
            )
        kwargs: dict[str, Any] = {}
        if ALLOW_METHODS in values:
            listed = str(values[ALLOW_METHODS]).strip()
            kwargs["allow_methods"] = (
                None if listed == "all" else _names(values[ALLOW_METHODS], ALLOW_METHODS, where)
            )
        if ALLOW_RAW_ROWS in values:
            kwargs["allow_raw_rows"] = _flag(values[ALLOW_RAW_ROWS], ALLOW_RAW_ROWS, where)
        if REQUIRE_SECURE in values:
            kwargs["require_secure"] = _flag(values[REQUIRE_SECURE], REQUIRE_SECURE, where)
        if MAX_LEVELS in values:
            raw = values[MAX_LEVELS]
            if isinstance(raw, bool) or not str(raw).strip().isdigit():
                raise PolicyConfigError(
                    f"{where}: {MAX_LEVELS} must be a whole number >= 0, got {raw!r}"
                )
            kwargs["max_levels"] = int(str(raw).strip())
        if ALLOW_PLUGINS in values:
            kwargs["allow_plugins"] = _names(values[ALLOW_PLUGINS], ALLOW_PLUGINS, where)
        if AUDIT_LOG in values:
            path = str(values[AUDIT_LOG]).strip()
            if not path:
                raise PolicyConfigError(f"{where}: {AUDIT_LOG} is empty; name a file")
            kwargs["audit_log"] = path
        for key, name in ((DP_EPSILON, "dp_epsilon"), (DP_PERIOD_EPSILON, "dp_period_epsilon"),
                          (DP_PERIOD_DAYS, "dp_period_days")):  # fmt: skip
            if key in values:
                kwargs[name] = _positive(values[key], key, where)
        if DP_DELTA in values:
            kwargs["dp_delta"] = _positive(values[DP_DELTA], DP_DELTA, where, below_one=True)
        if DP_SHARES in values:
            raw = values[DP_SHARES]
            if isinstance(raw, bool) or not str(raw).strip().isdigit() or int(str(raw)) < 1:
                raise PolicyConfigError(
                    f"{where}: {DP_SHARES} must be a whole number >= 1, got {raw!r}"
                )
            kwargs["dp_shares"] = int(str(raw).strip())
        if DP_REQUIRE_DISTRIBUTED in values:
            kwargs["dp_require_distributed"] = _flag(
                values[DP_REQUIRE_DISTRIBUTED], DP_REQUIRE_DISTRIBUTED, where
            )
        budget = [k for k in NEED_DP_EPSILON if k in values]
        if budget and DP_EPSILON not in values:
            raise PolicyConfigError(f"{where}: {budget[0]} needs {DP_EPSILON} (the per-run cap)")
        if (DP_PERIOD_EPSILON in values) != (DP_PERIOD_DAYS in values):
            given, missing = (
                (DP_PERIOD_EPSILON, DP_PERIOD_DAYS)
                if DP_PERIOD_EPSILON in values
                else (DP_PERIOD_DAYS, DP_PERIOD_EPSILON)
            )
            raise PolicyConfigError(f"{where}: {given} needs {missing}")
        return cls(**kwargs)

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


class AuditLog:
    """A site's append-only JSON-lines log of what left it (one line per reply or refusal).

    Each line is written with one ``write`` on a file opened for appending (mode 600 when
    created), so concurrent ClientApp processes of one site do not interleave lines."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def append(self, record: Mapping[str, Any]) -> None:
        line = (json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def describe(arrays: Sequence[np.ndarray]) -> tuple[list[dict], int]:
    """``([{dtype, shape}, ...], bytes)`` of the arrays a reply carries."""
    shapes = [{"dtype": str(a.dtype), "shape": [int(s) for s in a.shape]} for a in arrays]
    return shapes, int(sum(int(a.nbytes) for a in arrays))


@dataclass
class SiteGuard:
    """The gate every reply of one client passes (see the module docstring).

    ``disclosures``: the method's declaration (action -> class); ``bootstrap``: whether the
    method takes the federated bootstrap (its built-in action); ``policy`` (None: no site policy,
    the declaration alone); ``secure_run``: the run config asks for SecAgg+; ``site``: the
    partition id; ``run``: the run's id, for the audit log."""

    method: str
    disclosures: Mapping[str, str]
    bootstrap: bool = False
    policy: SitePolicy | None = None
    secure_run: bool = False
    site: int = UNKNOWN_CLIENT
    run: str = ""
    audit: AuditLog | None = field(default=None, init=False)
    #: the privacy charge of the message being answered (logged with its reply)
    charge: dict[str, Any] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.policy is not None and self.policy.audit_log is not None:
            self.audit = AuditLog(self.policy.audit_log)

    # ------------------------------------------------------------------ checks
    def kind_of(self, action: str, payload: Mapping[str, Any] | None = None) -> str | None:
        """The class ``action`` discloses for this method (None: not declared); a bootstrap
        message is charged its most revealing part."""
        if action == HELLO:
            return METADATA
        if action == BOOTSTRAP:
            if not self.bootstrap:
                return None
            parts = [str(p.get("action")) for p in (payload or {}).get("parts", [])]
            kinds = [self.disclosures.get(p) for p in parts]
            return None if None in kinds else most_revealing(k for k in kinds if k)
        return self.disclosures.get(action)

    def check(
        self,
        action: str,
        payload: Mapping[str, Any] | None = None,
        round_: int | None = None,
        secagg_participants: int | None = None,
    ) -> str:
        """The class of ``action`` if this site may answer it, else a logged
        :class:`PolicyRefusal`. ``secagg_participants``: the reply goes through SecAgg+ with this
        many participants (None: it does not)."""
        kind = self.kind_of(action, payload)
        secure = secagg_participants is not None

        def refuse(key: str, message: str) -> NoReturn:
            self.refuse(key, message, action=action, round_=round_, secure=secure, kind=kind)

        try:  # hello carries the run's plan instead (read in _check_privacy)
            charge = None if action == HELLO else PrivacyCharge.of(payload or {})
        except MalformedPayload as err:
            refuse(UNDECLARED, f"site {self.site} refuses action {action!r}: {err}")
        self.charge = None if charge is None else self._own_count(charge, action, refuse)
        if charge is not None and charge.shares is not None:
            if secagg_participants is None:
                refuse(
                    UNDECLARED,
                    f"site {self.site} refuses action {action!r}: its share of the noise would "
                    "reach the server outside SecAgg+ (a table with 1/"
                    f"{charge.shares} of the run's noise)",
                )
            trusted = self.trusted_shares(charge.shares)
            if secagg_participants < trusted:
                refuse(
                    DP_SHARES,
                    f"site {self.site} refuses action {action!r}: it counts on {trusted} sites' "
                    f"noise shares, and its SecAgg+ round has {secagg_participants} participants",
                )

        if kind is None:
            declared = ", ".join(f"{a} ({k})" for a, k in self.disclosures.items()) or "none"
            refuse(
                UNDECLARED,
                f"site {self.site} refuses action {action!r}: method {self.method!r} does not "
                f"declare it (its declared actions: {declared})",
            )
        policy = self.policy
        if policy is None:
            return kind
        if policy.allow_methods is not None and self.method not in policy.allow_methods:
            refuse(
                ALLOW_METHODS,
                f"site {self.site} refuses method {self.method!r}: its policy {ALLOW_METHODS} "
                f"allows {', '.join(sorted(policy.allow_methods)) or 'none'}",
            )
        if discloses_raw(self.disclosures) and not policy.allow_raw_rows:
            refuse(
                ALLOW_RAW_ROWS,
                f"site {self.site} refuses method {self.method!r}: it sends the site's rows and "
                f"its policy has {ALLOW_RAW_ROWS} = false",
            )
        if policy.require_secure:
            if not self.secure_run:
                refuse(
                    REQUIRE_SECURE,
                    f"site {self.site} refuses a plain run of {self.method!r}: its policy has "
                    f"{REQUIRE_SECURE} = true (run with secure=true)",
                )
            problem = None
            if kind in (PER_CLIENT, RAW):
                problem = f"it would send this site's own statistics ({kind})"
            elif kind == SUM and secagg_participants is None:
                problem = "its sum would reach the server outside SecAgg+"
            elif kind == SUM and (secagg_participants or 0) < MIN_SECURE_PARTICIPANTS:
                problem = f"its SecAgg+ round has {secagg_participants} participant"
            if problem:
                refuse(
                    REQUIRE_SECURE,
                    f"site {self.site} refuses action {action!r} of {self.method!r}: {problem} "
                    f"and its policy has {REQUIRE_SECURE} = true",
                )
        self._check_privacy(action, kind, payload or {}, refuse)
        return kind

    def _own_count(
        self, charge: PrivacyCharge, action: str, refuse: Callable[[str, str], NoReturn]
    ) -> dict[str, Any]:
        """The charge as the site counts it: ``rho = tables / (2 variance)`` from the request's
        tables and noise, never the ``rho`` the request states (a forged negative or small
        ``rho`` would otherwise lower what the site's log says it spent)."""
        tables, variance = charge.tables, charge.variance
        if (
            not _whole(tables)
            or not isinstance(variance, int | float)
            or not 0 <= variance < math.inf
        ):
            refuse(
                UNDECLARED,
                f"site {self.site} refuses action {action!r}: its privacy charge names "
                f"{tables!r} tables with noise variance {variance!r}",
            )
        clip, resolution = charge.clip, charge.resolution
        if any(v is not None and not (isinstance(v, int | float) and 0 < v < math.inf)
               for v in (clip, resolution)):  # fmt: skip
            refuse(
                UNDECLARED,
                f"site {self.site} refuses action {action!r}: its privacy charge names a clip "
                f"bound {clip!r} and a resolution {resolution!r}",
            )
        if resolution is not None and not _whole(charge.cells):
            refuse(
                UNDECLARED, f"site {self.site} refuses action {action!r}: {charge.cells!r} cells"
            )
        squared = release_sensitivity2(tables, charge.cells or 0, clip, resolution)
        shares, cells = charge.shares, charge.cells
        counted: dict[str, Any] = {}
        if shares is not None:
            if not _whole(shares) or not _whole(cells):
                refuse(
                    UNDECLARED,
                    f"site {self.site} refuses action {action!r}: its privacy charge names "
                    f"{shares!r} noise shares over {cells!r} cells",
                )
            # its own count: the noise of the shares it trusts, each as large as the run's
            trusted = counted["trusted"] = self.trusted_shares(shares)
            variance = variance / shares * trusted
            shares = trusted
        try:
            rho = release_rho(squared, variance, shares, cells or 0)
        except ValueError as err:  # shares too small for the distributed bound
            refuse(UNDECLARED, f"site {self.site} refuses action {action!r}: {err}")
        return {**charge.encode(), "rho": None if math.isinf(rho) else rho, **counted}

    def trusted_shares(self, shares: int) -> int:
        """How many of a distributed run's ``shares`` noise shares this site counts on: its
        policy's ``dp-shares`` (default 1, its own, when it sets a budget; all without one)."""
        policy = self.policy
        if policy is None or policy.dp_epsilon is None:
            return shares
        return min(shares, policy.dp_shares or 1)

    def _check_privacy(
        self,
        action: str,
        kind: str,
        payload: Mapping[str, Any],
        refuse: Callable[[str, str], NoReturn],
    ) -> None:
        """A site with a privacy budget answers only what it can afford: a run's plan at
        ``hello``, and each statistic's charge, against the run's cap and the period's."""
        policy = self.policy
        if policy is None or policy.dp_epsilon is None or kind == METADATA and action != HELLO:
            return
        cap = _cap(policy.dp_epsilon, policy.dp_delta)
        wording = f"(epsilon {policy.dp_epsilon:g} at delta {policy.dp_delta:g})"
        plan = None
        if action == HELLO:
            try:
                plan = PrivacyPlan.of(payload)
            except MalformedPayload as err:
                refuse(UNDECLARED, f"site {self.site} refuses hello: {err}")
            cost = None if plan is None else plan.rho
            if cost is not None and not 0 < cost < math.inf:
                refuse(DP_EPSILON, f"site {self.site} refuses hello: a planned rho of {cost!r}")
            what = "the run plans to spend"
            if plan is not None and plan.shares is not None and cost is not None:
                if not _whole(plan.shares):
                    refuse(UNDECLARED, f"site {self.site} refuses hello: {plan.shares!r} shares")
                trusted = self.trusted_shares(plan.shares)
                cost *= plan.shares / trusted  # its own count: the shares it counts on
                if trusted < plan.shares:
                    what = (
                        f"counting on {trusted} of the run's {plan.shares} noise shares (its "
                        f"policy {DP_SHARES}), the run plans to spend"
                    )
        else:
            cost = None if self.charge is None else self.charge.get("rho")
            what = "this reply with the run's earlier ones would spend"
        central = (
            plan is None or plan.shares is None
            if action == HELLO
            else (self.charge is None or self.charge.get("shares") is None)
        )
        if policy.dp_require_distributed and central:
            refuse(
                DP_REQUIRE_DISTRIBUTED,
                f"site {self.site} refuses {action!r}: the run does not add its noise at the "
                f"sites (the server would hold the noiseless sum) and its policy has "
                f"{DP_REQUIRE_DISTRIBUTED} = true (run with dp=distributed and secure=true)",
            )
        if cost is None:
            refuse(
                DP_EPSILON,
                f"site {self.site} refuses a run without differential privacy: its policy "
                f"{DP_EPSILON} = {policy.dp_epsilon:g} answers only runs that add noise "
                "(e.g. fedpc with dp=central or dp=distributed and a finite dp_epsilon)",
            )
        run_spent, period_spent = self._spent()
        spent = run_spent if action != HELLO else 0.0
        if spent + cost > cap:
            refuse(
                DP_EPSILON,
                f"site {self.site} refuses {action!r}: {what} rho {spent + cost:.4g}, over its "
                f"policy {DP_EPSILON} {wording}, rho {cap:.4g}",
            )
        if policy.dp_period_epsilon is not None:
            period_cap = _cap(policy.dp_period_epsilon, policy.dp_delta)
            before = period_spent
            if before + cost > period_cap:
                refuse(
                    DP_PERIOD_EPSILON,
                    f"site {self.site} refuses {action!r}: the last {policy.dp_period_days:g} "
                    f"days spent rho {before:.4g} of its policy {DP_PERIOD_EPSILON} "
                    f"{policy.dp_period_epsilon:g} (rho {period_cap:.4g}); {what} {cost:.4g} "
                    "more",
                )

    def _spent(self) -> tuple[float, float]:
        """The zCDP ``rho`` this site's audit log records as spent, read in one pass: by this
        run, and by every run within the policy's period."""
        if self.audit is None or not self.audit.path.exists():
            return 0.0, 0.0
        policy = self.policy
        days = policy.dp_period_days if policy is not None else None
        since = time.time() - (days or 0) * 86400
        by_run, in_period = [], []
        for line in self.audit.path.read_text(encoding="utf-8").splitlines():
            if '"privacy"' not in line:  # most lines: no charge to parse
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            charge = record.get("privacy") if isinstance(record, dict) else None
            if not isinstance(charge, dict) or record.get("outcome") != "sent":
                continue
            rho = float(charge.get("rho") or 0.0)
            if record.get("run") == self.run:
                by_run.append(rho)
            if _seconds(record.get("time")) >= since:
                in_period.append(rho)
        return math.fsum(by_run), math.fsum(in_period)

    def check_levels(self, frame: Any, levels: Mapping[str, list | None]) -> None:
        """``hello`` discloses no column with more distinct values than ``max-levels`` (a column
        over it is refused, naming it, instead of being reported)."""
        policy = self.policy
        if policy is None:
            return
        from fedcausal_flwr.data.columns import is_decimal  # pandas only where a frame is

        for position, name in enumerate(frame.columns):
            name = str(name)
            if levels.get(name) is not None and len(levels[name] or []) <= policy.max_levels:
                continue
            series = frame.iloc[:, position]
            if levels.get(name) is None and is_decimal(series.dtype):
                continue  # float columns disclose no values
            count = int(series.nunique(dropna=True))
            if count > policy.max_levels:
                self.refuse(
                    MAX_LEVELS,
                    f"site {self.site} refuses hello: column {name!r} has {count} distinct "
                    f"values and its policy {MAX_LEVELS} = {policy.max_levels} (an identifier or "
                    "free-text column? leave it out of the site's file)",
                    kind=METADATA,
                    action=HELLO,
                    round_=None,
                    secure=False,
                )

    def hello_cap(self, asked: int) -> int:
        """How many distinct values ``hello`` may list per column: the server's cap, lowered
        to the site's ``max-levels``."""
        return asked if self.policy is None else min(asked, self.policy.max_levels)

    # ------------------------------------------------------------------ the log
    def sent(
        self,
        action: str,
        kind: str,
        arrays: Sequence[np.ndarray],
        meta: Mapping[str, Any],
        round_: int | None,
        secure: bool,
    ) -> None:
        """Log a reply about to leave the site."""
        if self.audit is None:
            return
        shapes, nbytes = describe(arrays)
        private = {} if self.charge is None else {"privacy": self.charge}
        self._log(
            "sent", action, kind, round_, secure, arrays=shapes, bytes=nbytes,
            meta_keys=sorted(meta), **private,
        )  # fmt: skip

    def refuse(
        self,
        key: str,
        message: str,
        *,
        action: str,
        round_: int | None,
        secure: bool,
        kind: str | None = None,
    ) -> NoReturn:
        """Log a refusal and raise it."""
        if self.audit is not None:
            self._log("refused", action, kind, round_, secure, policy=key, reason=message)
        raise PolicyRefusal(self.site, key, message)

    def _log(
        self,
        outcome: str,
        action: str,
        kind: str | None,
        round_: int | None,
        secure: bool,
        **fields: Any,
    ) -> None:
        now = time.time()
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
            + f".{int(now * 1000) % 1000:03d}Z",
            "run": self.run,
            "site": self.site,
            "method": self.method,
            "action": action,
            "class": kind,
            "round": round_,
            "secure": bool(secure),
            "outcome": outcome,
            **fields,
        }
        assert self.audit is not None
        try:
            self.audit.append(record)
        except OSError as err:
            # nothing leaves a site that its log does not show
            raise PolicyRefusal(
                self.site,
                AUDIT_LOG,
                f"site {self.site} cannot write its audit log ({err.strerror}); nothing is sent",
            ) from None


def _whole(value: Any) -> TypeGuard[int]:
    """A whole number >= 1 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _cap(epsilon: float, delta: float) -> float:
    """A budget's zCDP ``rho``, with the margin a float sum of charges may need."""
    return rho_for(epsilon, delta) * (1 + 1e-9)


def _seconds(stamp: Any) -> float:
    """The epoch seconds of an audit line's ``time`` (0: unreadable)."""
    try:
        return calendar.timegm(time.strptime(str(stamp)[:19], "%Y-%m-%dT%H:%M:%S"))
    except ValueError:
        return 0.0


def describe_policy(policy: SitePolicy) -> list[str]:
    """The policy in words, one line per key (for ``federation up`` and the docs)."""
    methods = (
        "every method" if policy.allow_methods is None else ", ".join(sorted(policy.allow_methods))
    )
    return [
        f"{ALLOW_METHODS}: {methods}",
        f"{ALLOW_RAW_ROWS}: {str(policy.allow_raw_rows).lower()}",
        f"{REQUIRE_SECURE}: {str(policy.require_secure).lower()}",
        f"{MAX_LEVELS}: {policy.max_levels}",
        f"{ALLOW_PLUGINS}: {', '.join(sorted(policy.allow_plugins)) or 'none'}",
        f"{AUDIT_LOG}: {policy.audit_log or 'beside the data file'}",
        f"{DP_EPSILON}: "
        + (
            "none (no privacy budget)"
            if policy.dp_epsilon is None
            else f"{policy.dp_epsilon:g} per run at {DP_DELTA} {policy.dp_delta:g}"
            + (
                f"; {policy.dp_period_epsilon:g} per {policy.dp_period_days:g} days"
                if policy.dp_period_epsilon is not None
                else ""
            )
            + f"; counts on {policy.dp_shares or 1} site(s)' noise shares in a distributed run"
            + ("; distributed noise only" if policy.dp_require_distributed else "")
        ),
    ]
