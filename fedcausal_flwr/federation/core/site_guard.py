"""The gate every message of a site passes: :class:`SiteGuard` (Flower-free).

Built with each client from its method's declared disclosures (:mod:`.disclosure`) and, at a
site, its policy (:mod:`.site_policy`). A client answers only the actions its method declares,
and only what the policy allows; anything else is a :class:`PolicyRefusal` (a typed refusal
naming the site and the policy key: the server stops the run). Every reply, refusal and error is
logged in the site's audit log (:mod:`.audit_log`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np

from fedcausal_flwr.federation.core.audit_log import AuditLog, describe
from fedcausal_flwr.federation.core.disclosure import (
    LOCAL,
    MEANING,
    METADATA,
    PER_CLIENT,
    RAW,
    SUM,
    discloses_raw,
    most_revealing,
)
from fedcausal_flwr.federation.core.messages import (
    BOOTSTRAP,
    HELLO,
    UNKNOWN_CLIENT,
    ProtocolError,
    to_json,
)
from fedcausal_flwr.federation.core.run_binding import (
    HELLO_KEY,
    BindingStore,
    RunBinding,
    canonical,
    scope_problem,
)
from fedcausal_flwr.federation.core.site_bundle import BUNDLE
from fedcausal_flwr.federation.core.site_policy import (
    ALLOW_METHODS,
    ALLOW_PLAIN_STATISTICS,
    ALLOW_RAW_ROWS,
    AUDIT_LOG,
    FILE_KEYS,
    KEY,
    MAX_LEVELS,
    MAX_REQUEST_CELLS,
    MIN_SECURE_PARTICIPANTS,
    REQUIRE_SECURE,
    SECURE_PARTICIPANTS,
    SitePolicy,
    in_words,
)
from fedcausal_flwr.payload import MalformedPayload
from fedcausal_flwr.privacy.charges import PrivacyCharge
from fedcausal_flwr.privacy.site_budget import BudgetRefusal, SiteBudget

#: the refusal key of an action the method does not declare (no policy can allow it)
UNDECLARED = "declared disclosures"


class PolicyRefusal(ProtocolError):
    """A site refuses a message: its method does not declare the action, or the site's policy
    does not allow it (``key`` names the policy key, or :data:`UNDECLARED`)."""

    def __init__(self, client: int, key: str, message: str):
        super().__init__(client, message)
        self.key = key


#: what each refusal key that is not a policy key means, in words that carry no data
REFUSAL_MEANING = {
    UNDECLARED: "the method does not declare this action, or the request is malformed",
    HELLO_KEY: "it comes before this run's accepted hello, after a refused one, or outside the "
    "columns and levels the hello reported",
    BUNDLE: "the run's bundle is not this project's manifest-only bundle",
}


def roster_size(policy: SitePolicy) -> int:
    """How many sites the policy's roster names (0: no roster)."""
    from fedcausal_flwr.federation.core.site_identity import read_roster  # secure sums only

    return 0 if policy.roster is None else len(read_roster(policy.roster))


def public_error(
    error: BaseException, site: int, action: str, policy: SitePolicy | None = None
) -> str:
    """What a site says to the server about an error or refusal: the site, the action, the
    policy key and its setting or the kind of problem, and a column name where the error names
    one; never a value, a count, a row or a file's content (the full text stays in its audit
    log)."""
    where = f"site {site} refuses " + (f"action {action!r}" if action else "the message")
    if isinstance(error, PolicyRefusal):
        if error.key in KEY and policy is not None:
            value = getattr(policy, KEY[error.key].field)
            if error.key in FILE_KEYS:  # where the site keeps its files is its own business
                setting = "a file" if value else "none"
            else:
                setting = in_words(KEY[error.key], value)
            why = f"its policy has {error.key} = {setting}"
        else:
            why = f"{error.key}: {REFUSAL_MEANING.get(error.key, 'refused by its policy')}"
    elif isinstance(error, ProtocolError):
        why = error.kind or "the request does not fit this site's data or options"
        if error.column is not None:
            why += f" (column {error.column!r})"
    else:
        where, why = (
            f"site {site} failed at " + (f"action {action!r}" if action else "a message"),
            type(error).__name__,
        )
    return f"{where}: {why}; the site's audit log has the full reason"


@dataclass
class SiteGuard:
    """The gate every reply of one client passes (see the module docstring).

    ``disclosures``: the method's declaration (action -> class); ``bootstrap``: whether the
    method takes the federated bootstrap (its built-in action); ``policy`` (None: no site policy,
    the declaration alone); ``secure_run``: the run config asks for SecAgg+; ``site``: the
    partition id; ``run``: the run's id, for the audit log; ``store``: where a site keeps what
    its ``hello`` accepted for the run (:mod:`.run_binding`)."""

    method: str
    disclosures: Mapping[str, str]
    bootstrap: bool = False
    policy: SitePolicy | None = None
    secure_run: bool = False
    site: int = UNKNOWN_CLIENT
    run: str = ""
    #: the node's own state for the run (None: no binding kept, as on a simulated node)
    store: BindingStore | None = None
    #: the widest table the run's declared depth needs (:func:`.run_binding.widest_table`)
    max_width: int | None = None
    #: the columns of the site's file its policy keeps home (``share-columns``)
    withheld: frozenset[str] = frozenset()
    audit: AuditLog | None = field(default=None, init=False)
    #: the privacy charge of the message being answered (logged with its reply)
    charge: dict[str, Any] | None = field(default=None, init=False)
    budget: SiteBudget = field(init=False)

    def __post_init__(self) -> None:
        if self.policy is not None and self.policy.audit_log is not None:
            self.audit = AuditLog(self.policy.audit_log)
        #: the site's privacy budget in this run (:mod:`fedcausal_flwr.privacy.site_budget`):
        #: its policy, and the audit log its earlier releases are read from at each check
        self.budget = SiteBudget(
            self.site, self.policy, self.run, None if self.audit is None else self.audit.path
        )

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
        summed_with: Sequence[str] | None = None,
    ) -> str:
        """The class of ``action`` if this site may answer it, else a logged
        :class:`PolicyRefusal`. ``secagg_participants``: the reply goes through SecAgg+ with this
        many participants (None: it does not); ``summed_with``: their roster names, as the site
        verified them (None: an unsigned round)."""
        kind = self.kind_of(action, payload)
        secure = secagg_participants is not None

        def refuse(key: str, message: str) -> NoReturn:
            self.refuse(key, message, action=action, round_=round_, secure=secure, kind=kind)

        charge = self._charge(action, payload or {}, secagg_participants, refuse)
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
        self._check_method(policy, refuse)
        binding = self._check_run_state(action, payload or {}, refuse)
        self._check_disclosure(policy, action, kind, secagg_participants, refuse)
        if (
            kind == SUM
            and policy.secure_participants is not None
            and summed_with is not None
            and len(summed_with) < roster_size(policy)
            and (charge is None or charge.shares is None)
        ):
            refuse(
                SECURE_PARTICIPANTS,
                f"site {self.site} refuses {action!r}: its sum is with {len(summed_with)} of the "
                f"roster's {roster_size(policy)} sites, which its policy {SECURE_PARTICIPANTS} "
                "allows only with its own noise share (dp=distributed)",
            )
        if binding is not None and action != HELLO:
            problem = scope_problem(binding, payload or {}, policy.max_levels)
            if problem:
                refuse(HELLO_KEY, f"site {self.site} refuses {action!r}: {problem}")
        if kind != METADATA or action == HELLO:
            try:
                self.budget.check(action, action == HELLO, payload or {}, self.charge)
            except BudgetRefusal as refusal:
                refuse(refusal.key or UNDECLARED, refusal.message)
        return kind

    def _charge(
        self,
        action: str,
        payload: Mapping[str, Any],
        secagg_participants: int | None,
        refuse: Callable[[str, str], NoReturn],
    ) -> PrivacyCharge | None:
        """The request's privacy charge (None: not private; ``hello`` carries the run's plan
        instead, which the budget reads), counted the site's own way into :attr:`charge`; a
        noise share leaves only inside SecAgg+."""
        try:
            charge = None if action == HELLO else PrivacyCharge.of(payload)
        except MalformedPayload as err:
            refuse(UNDECLARED, f"site {self.site} refuses action {action!r}: {err}")
        try:
            self.charge = None if charge is None else self.budget.count(charge, action)
            if charge is not None:
                self.budget.check_shares(charge, action, secagg_participants)
        except BudgetRefusal as refusal:
            refuse(refusal.key or UNDECLARED, refusal.message)
        return charge

    def _check_method(self, policy: SitePolicy, refuse: Callable[[str, str], NoReturn]) -> None:
        """The policy's word on the method and the run as a whole: allowed methods, raw rows, a
        secure run."""
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
        if policy.require_secure and not self.secure_run:
            refuse(
                REQUIRE_SECURE,
                f"site {self.site} refuses a plain run of {self.method!r}: its policy has "
                f"{REQUIRE_SECURE} = true (run with secure=true)",
            )

    def _check_disclosure(
        self,
        policy: SitePolicy,
        action: str,
        kind: str,
        secagg_participants: int | None,
        refuse: Callable[[str, str], NoReturn],
    ) -> None:
        """What this reply discloses against the policy: the site's own statistics in the plain
        (``allow-plain-statistics``), and under ``require-secure`` anything but a sum through
        a SecAgg+ round of at least two sites."""
        if kind == PER_CLIENT or kind == SUM and secagg_participants is None:
            problem = (
                f"it would send this site's own statistics ({kind})"
                if kind == PER_CLIENT
                else "its sum would reach the server outside SecAgg+ (this site's own statistics)"
            )
            if policy.require_secure or not policy.allow_plain_statistics:
                key = REQUIRE_SECURE if policy.require_secure else ALLOW_PLAIN_STATISTICS
                refuse(
                    key,
                    f"site {self.site} refuses action {action!r} of {self.method!r}: {problem} "
                    f"and its policy has {key} = {str(key == REQUIRE_SECURE).lower()}"
                    + ("" if self.secure_run else " (run with secure=true)"),
                )
        if not policy.require_secure:
            return
        unsecured = None
        if kind in (LOCAL, RAW):
            unsecured = f"it would send this site's own {MEANING[kind]}"
        elif kind == SUM and (secagg_participants or 0) < MIN_SECURE_PARTICIPANTS:
            unsecured = f"its SecAgg+ round has {secagg_participants} participant"
        if unsecured:
            refuse(
                REQUIRE_SECURE,
                f"site {self.site} refuses action {action!r} of {self.method!r}: {unsecured} "
                f"and its policy has {REQUIRE_SECURE} = true",
            )

    def check_cells(
        self, action: str, cells: int, width: int | None = None, round_: int | None = None
    ) -> None:
        """Refuse a request whose answer would make the site allocate more than its policy's
        ``max-request-cells``, or count a table over more variables than the run's declared
        depth needs (``width``: its widest table), checked before anything is allocated."""
        policy = self.policy
        if policy is None:
            return
        problem = None
        if width is not None and self.max_width is not None and width > self.max_width:
            key = HELLO_KEY
            problem = (
                f"a table over {width} variables, wider than the run's declared depth needs "
                f"({self.max_width})"
            )
        elif cells > policy.max_request_cells:
            key = MAX_REQUEST_CELLS
            problem = (
                f"its answer needs {cells:,} cells, over its policy {MAX_REQUEST_CELLS} = "
                f"{policy.max_request_cells:,}"
            )
        if problem is not None:
            self.refuse(
                key,
                f"site {self.site} refuses {action!r}: {problem}",
                action=action,
                round_=round_,
                secure=False,
                kind=self.kind_of(action),
            )

    def cell_cap(self) -> int | None:
        """The most cells one request may need here (None: no policy, no cap): hello reports
        it, so the coordinator's own ServerApp plans its batches within it."""
        return None if self.policy is None else self.policy.max_request_cells

    # ------------------------------------------------------------------ the run's binding
    def bound(self) -> RunBinding | None:
        """What this run's hello fixed at this site (None: no hello answered yet)."""
        if self.store is None:
            return None
        binding = RunBinding.decode(self.store.load())
        return binding if binding is not None and binding.run == self.run else None

    def _check_run_state(
        self, action: str, payload: Mapping[str, Any], refuse: Callable[[str, str], NoReturn]
    ) -> RunBinding | None:
        """Nothing but ``hello`` before an accepted one, nothing after a refused one, and one
        hello per run (:mod:`.run_binding`); the run's binding (None: none is kept here)."""
        if self.store is None or self.policy is None:
            return None
        binding = self.bound()
        if binding is not None and not binding.accepted:
            refuse(
                HELLO_KEY,
                f"site {self.site} refuses {action!r}: it refused this run's hello and answers "
                "nothing more in the run",
            )
        if action == HELLO:
            if binding is not None and binding.hello != canonical(dict(payload)):
                refuse(HELLO_KEY, f"site {self.site} refuses a second, different hello in a run")
            return binding
        if binding is None:
            refuse(
                HELLO_KEY,
                f"site {self.site} refuses {action!r}: it answers nothing but hello until it has "
                "accepted one in this run",
            )
        return binding

    def bind_hello(self, payload: Mapping[str, Any], report: Mapping[str, Any]) -> None:
        """Keep what this run's accepted hello fixed: its payload, the levels its ``report``
        gave (as they travelled: JSON) and the columns the site keeps home."""
        if self.store is not None and self.policy is not None:
            reported = json.loads(to_json(dict(report.get("levels") or {})))
            binding = RunBinding(
                self.run, True, canonical(dict(payload)), reported, sorted(self.withheld)
            )
            self.store.save(binding.encode())

    def bind_refused(self) -> None:
        """This run's hello was refused (or failed): the site answers nothing more in the run."""
        if self.store is not None and self.policy is not None:
            self.store.save(RunBinding(self.run, False).encode())

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
        summed_with: Sequence[str] | None = None,
    ) -> None:
        """Log a reply about to leave the site (``summed_with``: the roster names of the sites
        its SecAgg+ sum is with, as this site verified them)."""
        if self.audit is None:
            return
        shapes, nbytes = describe(arrays)
        private: dict[str, Any] = {} if self.charge is None else {"privacy": self.charge}
        if summed_with is not None:
            private["participants"] = sorted(summed_with)
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

    def log_error(self, action: str, error: BaseException) -> None:
        """Log an error this site is about to answer with (its full text stays here)."""
        if self.audit is not None and not isinstance(error, PolicyRefusal):  # refusals are
            detail = error.detail if isinstance(error, ProtocolError) else str(error)
            self._log("error", action, None, None, False, error=type(error).__name__,
                      reason=detail)  # fmt: skip

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
