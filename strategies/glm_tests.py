"""fedCI's federated CI tests, owned by no method: a likelihood-ratio test of two nested GLMs
fitted by federated IRLS (the clients' summed blocks), or Fisher's combination of the clients'
own p-values, inside the batched PC/FCI engine (Flower-free).

``fedci-pc`` / ``fedci-fci`` (:mod:`fedcausal_flwr.strategies.fedci`) are :class:`GLMTestsStrategy`
with PC's or FCI's search and options; fedCI-IOD
(:mod:`fedcausal_flwr.strategies.fedci_iod`) extends it to sites with different variable sets.
Their options (:data:`FEDCI_PC_OPTIONS`, :data:`FEDCI_FCI_OPTIONS`) and SecAgg+ support are
declared here once; their wire protocol (payloads, replies, the fixed-point encoding) and
disclosures beside the actions, in :mod:`fedcausal_flwr.protocols.fedci`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.data.schema import Schema, VariableSpec
from fedcausal_flwr.discovery.driver import StepRunner, with_cache
from fedcausal_flwr.discovery.fci import fci_steps
from fedcausal_flwr.discovery.pc import pc_steps
from fedcausal_flwr.discovery.search_report import search_evidence
from fedcausal_flwr.federation.core.input_checks import InputNeeds
from fedcausal_flwr.federation.core.messages import (
    ClientInfo,
    ClientProtocolError,
    Reply,
    Request,
)
from fedcausal_flwr.options import Option, OptionError, OptionSet, content_only, say
from fedcausal_flwr.privacy.accounting import release_sensitivity2
from fedcausal_flwr.privacy.charges import PrivacyCharge
from fedcausal_flwr.protocols.fedci import (
    FIXED_FRACTION_BITS,
    FIXED_LIMBS,
    GLM,
    LOCAL_LRT,
    GLMRequest,
    LocalLRTRequest,
    decode_fixed,
    digit_bits,
    model_row,
)
from fedcausal_flwr.stats.batch_oracle import Query
from fedcausal_flwr.stats.glm import (
    SITE_EFFECTS,
    CITestResult,
    NewtonState,
    fisher_combine,
    new_state,
    packed_size,
    result_from_states,
    test_models,
)
from fedcausal_flwr.strategies import shared_options as shared
from fedcausal_flwr.strategies.base import MethodStrategy
from fedcausal_flwr.strategies.search_stop import privacy_report, server_noise, stop_search

ENCODINGS = ("auto", "float", "fixed")
CI_TESTS = ("fedci", "fisher")
#: with dp: each row's contribution to each model is clipped to this L2 norm (its own packed
#: blocks: a few units for most rows, tens for a continuous response's outliers; a bound that
#: binds often biases the likelihood ratios, one far above them costs noise)
DEFAULT_DP_CLIP = 20.0
#: with dp: IRLS rounds per batch (each a release)
DEFAULT_DP_ROUNDS = 4


#: What to do about variables whose kind the dtypes do not tell (the ``schema`` option).
SCHEMA_FIX = Fix("declare the variable kinds with {}", (("schema", "FILE"),))


def schema_from_hello(info: dict[int, ClientInfo], entry_point: str = "python") -> Schema:
    """Kinds from the hello dtypes, levels as the union (see the module docstring); ``entry_point``
    spells the option of the fix in an error."""
    specs: dict[str, VariableSpec] = {}
    for pid in sorted(info):
        for col in info[pid].columns:
            dtype = info[pid].dtypes[col]
            if dtype.lower().startswith("float"):
                kind, levels = "continuous", None
            elif dtype.lower().startswith("bool"):
                kind, levels = "binary", (False, True)
            else:
                reported = info[pid].levels.get(col)
                if reported is None:
                    raise InputError(
                        f"(dtype {dtype}) reports no level set (too many distinct values)",
                        client=pid,
                        column=col,
                        fix=SCHEMA_FIX,
                        entry_point=entry_point,
                    )
                kind = "categorical"
                # (no levels if another client's column is continuous: the kind check says so)
                old = (specs[col].levels or ()) if col in specs else ()
                levels = tuple(sorted(set(old) | set(reported), key=str))
            if col in specs and specs[col].kind != kind:
                raise InputError(
                    f"is {kind} at client {pid} but {specs[col].kind} at an earlier client",
                    column=col,
                    fix=SCHEMA_FIX,
                    entry_point=entry_point,
                )
            specs[col] = VariableSpec(col, kind, levels)
    return Schema(tuple(specs.values()))


#: how a run config gives a schema: its JSON, inline
SCHEMA_INLINE = """schema='{"variables": [{"name": "A", "kind": "binary", "levels": [0, 1]}]}'"""
#: what a schema is, for an error that may not quote the value (a run config's)
SCHEMA_SHAPE = (
    'a JSON object {"variables": [...]} of distinct variables, each {"name": ..., "kind": '
    'continuous, binary, ordinal or categorical, "levels": [...] (not for continuous; two '
    "for binary)}"
)


def schema_value(value: Any, entry_point: str = "python") -> str:
    """A schema option as Schema JSON: a :class:`Schema`, its JSON text or, on the user's own
    entry points, a JSON file's path, so what travels on is content.

    From a run config (``entry_point`` ``config``) only JSON text is taken: anything else is
    refused without touching the file system, and no error quotes the value (every site and the
    coordinator resolve the run config; see :func:`content_only`).
    """
    inline = entry_point == "config"
    if isinstance(value, Schema):
        return value.dumps()
    if not isinstance(value, str) or not value.strip():
        got = "" if inline else f", got {value!r}"
        raise ValueError(f"expected a schema (JSON text or a JSON file){got}")
    text = value.strip()
    if not text.startswith("{"):
        if inline:
            raise ValueError(content_only("the schema JSON", SCHEMA_INLINE))
        path = Path(text).expanduser()
        if not path.is_file():
            raise ValueError(f"{text!r} is neither schema JSON nor an existing file")
        text = path.read_text()
    try:
        return Schema.from_json(text).dumps()
    except json.JSONDecodeError as err:  # its msg names the problem, never the text
        if inline:
            raise ValueError(
                f"not valid JSON (line {err.lineno}, column {err.colno}: {err.msg})"
            ) from None
        raise ValueError(f"not a valid schema: {err}") from None
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"not a valid schema: {SCHEMA_SHAPE if inline else err}") from None


#: fedCI's own options, in the order the entry points list them (the search engine's follow)
GLM_OPTIONS: tuple[Option, ...] = (
    Option(
        "ci",
        "str",
        "fedci",
        "CI test: federated IRLS likelihood-ratio tests equal to the pooled GLM tests "
        "(fedci), or Fisher's combination of the clients' local tests (fisher)",
        choices=CI_TESTS,
        paper="fedci; fisher is the paper's meta-analysis baseline",
    ),
    shared.alpha(0.05, paper="0.05"),
    shared.max_depth(),
    Option(
        "site_effect",
        "str",
        "none",
        "client (site) effects in the GLMs: none, fixed site dummies in every model "
        "(fedCI), or private per-site intercepts that never leave the client",
        choices=SITE_EFFECTS,
        paper="fixed (fedCI in the paper); private (coordinate ascent) in the code",
        why="without site differences the test is exactly the pooled GLM test and the "
        "server learns no site coefficients; choose fixed or private for heterogeneous "
        "sites",
    ),
    Option(
        "ridge",
        "float",
        0.0,
        "ridge penalty of the IRLS steps",
        minimum=0.0,
        paper="1e-4 in the authors' code",
        why="unpenalised fits equal statsmodels' pooled GLM exactly",
    ),  # fmt: skip
    Option(
        "tol",
        "float",
        1e-5,
        "IRLS stops when the log-likelihood changes less",
        minimum=0.0,
        min_exclusive=True,
        paper="1e-5",
    ),  # fmt: skip
    Option(
        "max_iter", "int", 25, "IRLS iterations per model at most", minimum=1, paper="25"
    ),  # fmt: skip
    Option(
        "schema",
        "str",
        None,
        "variable kinds (continuous, binary, ordinal, categorical): Schema JSON, or a JSON "
        "file where the user runs (a run config carries the JSON); without it kinds come from "
        "the dtypes (ordinal needs a schema)",
        nullable=True,
        convert=schema_value,
        local_file=True,
    ),
    Option(
        "encoding",
        "str",
        "auto",
        "how GLM blocks travel: float64, or fixed-point digits that SecAgg+ sums exactly "
        "(auto: fixed in a secure run)",
        choices=ENCODINGS,
        requires=("ci", ("fedci",)),
    ),
    Option(
        "max_categories",
        "int",
        20,
        "largest number of levels of a categorical or ordinal variable (each level adds "
        "a block of coefficients to every model it enters; a column over the cap is "
        "refused before the first round)",
        minimum=2,
    ),
    Option(
        "fixed_fraction_bits",
        "int",
        FIXED_FRACTION_BITS,
        "fraction bits f of the fixed-point encoding",
        minimum=0,
        maximum=60,
    ),  # fmt: skip
    Option(
        "fixed_limbs",
        "int",
        FIXED_LIMBS,
        "digits L per value of the fixed-point encoding",
        minimum=1,
        maximum=8,
    ),  # fmt: skip
    shared.missing(),
)


#: fedCI's differential privacy (fedci-pc / fedci-fci; with the shared dp options)
DP_GLM_OPTIONS: tuple[Option, ...] = (
    # an even split: a depth is dp_rounds releases, which a halving rule would not share evenly
    *shared.dp_options(batches=2),
    Option(
        "dp_clip",
        "float",
        DEFAULT_DP_CLIP,
        "with dp: the L2 bound of each row's contribution to each GLM's blocks (objective, "
        "log-likelihood, RSS, count, IRLS vector and information), applied at its site: the "
        "sensitivity the noise is calibrated to (a row over it is scaled down to it)",
        minimum=0.0,
        min_exclusive=True,
        requires=("dp", ("central", "distributed")),
    ),
    Option(
        "dp_rounds",
        "int",
        DEFAULT_DP_ROUNDS,
        "with dp: IRLS rounds per batch of tests (each a release: the budget is split over "
        "dp_batches x dp_rounds of them; a model not converged by then keeps its last fit)",
        minimum=1,
        requires=("dp", ("central", "distributed")),
    ),
)


def dp_needs_fedci_tests(values: Mapping[str, Any], entry_point: str) -> str | None:
    """Cross-option rule: the noise goes on the summed GLM blocks of fedCI's own test, clipped
    row by row (a private site effect's blocks are not sums of rows' blocks)."""
    if values.get("dp", "off") == "off":
        return None
    dp = say("dp", values["dp"], entry_point)
    if values.get("ci") != "fedci":
        return f"{dp} adds noise to summed GLM blocks: it needs {say('ci', 'fedci', entry_point)}"
    if values.get("site_effect") == "private":
        return (
            f"{dp} clips each row's GLM blocks, and {say('site_effect', 'private', entry_point)} "
            "sends profile blocks that are not sums over rows: use site_effect none or fixed"
        )
    return shared.dp_covers_the_skeleton_only(values, entry_point)


def _options(algorithm: str) -> OptionSet:
    """fedCI-PC's (``pc``) or fedCI-FCI's (``fci``) declared options."""
    engine = shared.search_engine(algorithm)
    return OptionSet(
        (*GLM_OPTIONS, *engine, *DP_GLM_OPTIONS),
        checks=(shared.search_engine_problem, dp_needs_fedci_tests),
    )


FEDCI_PC_OPTIONS = _options("pc")
FEDCI_FCI_OPTIONS = _options("fci")
#: the search -> the fedCI method it makes and its options
FEDCI_METHOD_OF = {"pc": ("fedci-pc", FEDCI_PC_OPTIONS), "fci": ("fedci-fci", FEDCI_FCI_OPTIONS)}


class GLMTestsStrategy(MethodStrategy):
    """fedCI's federated GLM tests inside PC's or FCI's batched search, on mixed data: the core of
    fedCI-PC / fedCI-FCI (:mod:`~fedcausal_flwr.strategies.fedci` registers both, by
    :attr:`algorithm`) and of the IOD methods. It reads every fedCI option from :attr:`options`.

    With ``dp`` (fedCI-PC / fedCI-FCI): each round is a release of the pending models' blocks,
    clipped row by row at the sites (``dp_clip``) and rounded to multiples of ``2**-f``; a batch
    runs at most ``dp_rounds`` IRLS rounds and the search stops at depth ``dp_batches - 1``, so
    the budget is split over ``dp_batches x dp_rounds`` releases. The server reads the noisy
    sums as post-processing: it symmetrises the information, adds a ridge of ``3 sigma sqrt(P)``
    (about the spectral norm of a P x P noise matrix), and tests each LR statistic against chi2
    plus the noise of its two log-likelihoods
    (:func:`~fedcausal_flwr.stats.glm.noisy_chi2_sf`)."""

    name = "fedci-pc"
    #: the search: ``pc`` or ``fci`` (``algorithm="fci"`` makes fedCI-FCI; a subclass may set it)
    algorithm = "pc"
    OPTIONS = FEDCI_PC_OPTIONS
    VARIANTS = FEDCI_METHOD_OF

    def __init__(
        self, options: Mapping[str, Any] | None = None, /, *, algorithm: str | None = None,
        **keywords: Any,
    ) -> None:  # fmt: skip
        # fedCI-PC/-FCI are this class's variants by search; a subclass names its own variant
        super().__init__(options, **{"variant": algorithm, **keywords})
        self.algorithm = self.algorithm if algorithm is None else algorithm
        #: the server's side of a private run (None: dp off): lattice releases, for which
        #: dp_accounting has no PLD, stated in zCDP; ``dp_rounds`` IRLS rounds for each of
        #: ``dp_batches`` depths
        self.privacy = server_noise(
            self.options,
            int(self.options.dp_batches) * int(self.options.dp_rounds)
            if "dp_rounds" in self.options
            else None,
            "clipped GLM blocks",
            tight=False,
        )
        #: why the search ended before its last depth (None: it did not)
        self.stopped: str | None = None
        schema = self.options.schema  # checked Schema JSON, or None: kinds from the dtypes
        self.schema: Schema | None = None if schema is None else Schema.from_json(schema)
        #: the IRLS keywords of every fit (:func:`~fedcausal_flwr.stats.glm.new_state`)
        self.fit_options: dict[str, Any] = {
            "tol": self.options.tol,
            "max_iter": self.options.max_iter,
        }
        #: how the GLM blocks travel (``fixed`` or ``float``), settled when the search starts
        self.encoding: str | None = None
        self.cache: dict[Query, float] = {}
        self.tests: dict[Query, CITestResult] = {}
        self.runner: StepRunner | None = None
        self.batches: list[dict] = []
        self._fits: list[tuple[Query, list[NewtonState], tuple[int, ...]]] = []
        self._rounds_in_batch = 0
        self._names: list[str] = []
        #: the pending private release: (models, cells, noise variance, shares, sensitivity^2)
        self._release: tuple[int, int, float, int | None, float] | None = None

    @property
    def resolution(self) -> float:
        """The lattice the summed blocks are rounded to before the noise: ``2**-f``."""
        return 2.0 ** -int(self.options.fixed_fraction_bits)

    # ------------------------------------------------------------------ set-up
    def input_needs(self) -> InputNeeds:
        """The same variables at every site; without a schema each column's kind comes from the
        dtypes, so it must be the same everywhere; Fisher's baseline tests on each client's rows."""
        local = self.options.ci == "fisher"
        if self.schema is not None:
            return InputNeeds(values="any", local_tests=local, missing=self.options.missing)
        return InputNeeds(
            values="mixed", local_tests=local, kind_fix=SCHEMA_FIX, missing=self.options.missing
        )

    def validate_clients(self, info: dict[int, ClientInfo]) -> None:
        """The schema: inferred from the reports, or the given one, which must name every column."""
        if self.schema is None:
            self.schema = schema_from_hello(info, self.entry_point)
        names = self.schema.names
        for pid in sorted(info):
            unknown = [c for c in info[pid].columns if c not in names]
            if unknown:
                raise InputError(
                    f"has columns {unknown} that the schema does not declare",
                    client=pid,
                    fix="declare them in the schema or drop them",
                    entry_point=self.entry_point,
                )
        cap = self.options.max_categories
        for spec in self.schema:
            if spec.kind in ("categorical", "ordinal") and spec.card > cap:
                raise ValueError(
                    f"column {spec.name!r} has {spec.card} levels; fedCI's {spec.kind} models "
                    f"take at most max_categories={cap} (each level adds a "
                    f"block of coefficients to every model it enters). Drop or recode the "
                    f"column, or raise the cap: --max-categories {spec.card} (Python: "
                    f"max_categories={spec.card})"
                )

    def start_search(self, max_depth: int | None = None) -> StepRunner:
        """The search, capped at ``max_depth`` (default: the options' cap, and a private run's
        ``dp_batches - 1``); its batches answered before come from the cache."""
        self._begin()
        engine = shared.search_engine_options(self.algorithm, self.options)
        search = pc_steps if self.algorithm == "pc" else fci_steps
        depth = self.options.max_depth if max_depth is None else max_depth
        if self.privacy is not None:  # one budget share per skeleton depth
            cap = int(self.options.dp_batches) - 1
            depth = cap if depth is None else min(depth, cap)
        steps = search(self._names, self.options.alpha, depth, **engine)
        self.runner = StepRunner(with_cache(steps, self.cache))
        return self.runner

    def _begin(self) -> None:
        """The variables in the schema's order, and the run's encoding (``auto``: fixed-point
        digits in a secure run, float64 otherwise)."""
        assert self.schema is not None  # validate_clients has set it
        self._names = list(self.schema.names)
        encoding = self.options.encoding
        if encoding == "auto":
            encoding = "fixed" if self.secure_mode else "float"
        if encoding == "float" and self.secure_mode:
            raise ValueError("a secure run needs encoding='fixed' (or 'auto') for fedCI's blocks")
        self.encoding = encoding

    def _open_batch(self, queries: list[Query], schema: Schema) -> None:
        self._fits = []
        self._rounds_in_batch = 0
        for query in queries:
            x, y, s = (self._names[query[0]], self._names[query[1]],
                       [self._names[v] for v in query[2]])  # fmt: skip
            needed = [x, y, *s]
            clients = tuple(
                pid
                for pid in self.alive_clients
                if set(needed) <= set(self.client_info[pid].columns)
            )
            if not clients:
                raise ValueError(
                    f"CI test {x} _||_ {y} | {s}: no client observes all of {needed}; the engine "
                    "asked a test the federation cannot answer"
                )
            testwise = self.options.missing == "testwise"
            models = test_models(x, y, s, self.options.site_effect, clients, testwise)
            states = [new_state(m, schema, self.options.ridge, **self.fit_options) for m in models]
            if self.encoding == "fixed":  # quantisation must not look like a worse fit
                noise = 16.0 * len(self.alive_clients) * 2.0**-self.options.fixed_fraction_bits
                for state in states:
                    state.objective_noise = noise
            self._fits.append((query, states, clients))

    # ------------------------------------------------------------------ protocol
    def next_request(self) -> Request | None:
        runner = self.runner if self.runner is not None else self.start_search()
        queries = runner.pending
        if queries is None:  # the search has finished
            return None
        assert self.schema is not None  # validate_clients has set it
        if self.options.ci == "fisher":
            return self._fisher_request(queries, self.schema)
        if not self._fits:
            self._open_batch(queries, self.schema)
        pending = [s for _, states, _ in self._fits for s in states if not s.done]
        schema, models = self.schema.to_json(), [model_row(s.model) for s in pending]
        betas = np.concatenate([s.beta_eval for s in pending] + [np.zeros(0)])
        fixed = list(self._fixed_format()) if self.encoding == "fixed" else None
        privacy = None if self.privacy is None else self._charge_round(pending).encode()
        payload = GLMRequest(schema, self.options.missing, models, fixed, privacy)
        return Request(GLM, payload, arrays=[betas], secure=self.encoding == "fixed")

    def _charge_round(self, pending: list[NewtonState]) -> PrivacyCharge:
        """A private round: its noise (the run's budget over its releases) for the pending
        models' clipped blocks, and the charge the sites log."""
        cells = sum(packed_size(s.n_params) for s in pending)
        clip, resolution = float(self.options.dp_clip), self.resolution
        if clip * max(self.n_total, 1) / resolution >= 2.0**62:  # the lattice holds any sum
            raise OptionError(
                f"{self.name}: dp_clip={clip:g} over {self.n_total:,} rows can sum to more "
                f"than the lattice of 2**-{self.options.fixed_fraction_bits} holds in 63 bits: "
                "lower dp_clip or fixed_fraction_bits"
            )
        squared = release_sensitivity2(len(pending), cells, clip, resolution)
        assert self.privacy is not None  # a private round
        variance, shares = self.privacy.batch_noise(
            self.name, squared, cells, len(self.alive_clients)
        )
        self._release = (len(pending), cells, variance, shares, squared)
        return self.privacy.charge(len(pending), cells, variance, shares, clip, resolution)

    def _fixed_format(self) -> tuple[int, int, int]:
        bits = digit_bits(self.secure_bound)
        return self.options.fixed_fraction_bits, bits, self.options.fixed_limbs

    def _fisher_request(self, queries: list[Query], schema: Schema) -> Request:
        rows = [[self._names[q[0]], self._names[q[1]], [self._names[v] for v in q[2]]]
                for q in queries]  # fmt: skip
        payload = LocalLRTRequest(schema.to_json(), rows, self.options.ridge,
                                  self.options.missing, **self.fit_options)  # fmt: skip
        return Request(LOCAL_LRT, payload, nan_ok=True)

    def _handle_fisher(self, request: Request, replies: list[Reply]) -> None:
        local = np.vstack([np.asarray(r.arrays[0], dtype=np.float64) for r in replies])
        sizes = np.vstack([np.asarray(r.arrays[1], dtype=np.int64) for r in replies])
        pids = [r.client for r in replies]
        pvalues = []
        assert self.runner is not None and self.runner.pending is not None  # the asked batch
        asked = LocalLRTRequest.decode(request.payload)
        for i, (query, (x, y, s)) in enumerate(zip(self.runner.pending, asked.tests,
                                                   strict=True)):  # fmt: skip
            took_part = np.isfinite(local[:, i])
            if not took_part.any():
                raise ValueError(f"CI test {x} _||_ {y} | {s}: no client observes all of them")
            stat, df, p = fisher_combine(local[took_part, i])
            clients = tuple(pid for pid, ok in zip(pids, took_part, strict=True) if ok)
            n = int(sizes[took_part, i].sum())
            self.tests[query] = CITestResult(x, y, tuple(s), p, float("nan"), float("nan"), stat,
                                             stat, df, df, clients, n, 1)  # fmt: skip
            pvalues.append(p)
        self.batches.append({"round": self.current_round, "tests": len(pvalues), "rounds": 1})
        self.annotate(batch=len(self.batches) - 1, tests=len(pvalues))
        self.runner.answer(np.asarray(pvalues, dtype=float))

    def handle_replies(self, request: Request, replies: list[Reply]) -> None:
        if request.action == LOCAL_LRT:
            self._handle_fisher(request, replies)
            return
        pending = [s for _, states, _ in self._fits for s in states if not s.done]
        total: np.ndarray | None = None
        if request.secure:
            (summed,) = replies
            fixed = GLMRequest.decode(request.payload).fixed
            assert fixed is not None  # a secure glm request carries its fixed-point format
            total = decode_fixed(summed.arrays[0], *fixed)
        for reply in replies if not request.secure else []:  # partition order: deterministic
            vec = np.asarray(reply.arrays[0], dtype=np.float64)
            total = vec if total is None else total + vec
        assert total is not None  # a round has at least one reply
        if self.privacy is not None:
            total = self._noisy_blocks(total, replies, pending)
        offset = 0
        for s in pending:
            size = packed_size(s.n_params)
            s.update(total[offset : offset + size])
            offset += size
        self._rounds_in_batch += 1
        if self.privacy is not None and self._rounds_in_batch >= self.options.dp_rounds:
            for _, states, _ in self._fits:  # the batch's releases are spent: last fits stand
                for state in states:
                    if not state.done:
                        state.status = "dp_rounds"
        self.annotate(batch=len(self.batches), models=len(pending))
        if any(not s.done for _, states, _ in self._fits for s in states):
            return
        pvalues = []
        assert self.schema is not None and self.runner is not None  # set by next_request
        for query, states, clients in self._fits:
            x, y = self._names[query[0]], self._names[query[1]]
            cond = [self._names[v] for v in query[2]]
            res = result_from_states(
                x, y, cond, states, self.schema, clients, self._rounds_in_batch
            )
            self.tests[query] = res
            pvalues.append(res.p_value)
        self.batches.append(
            {"round": self.current_round, "tests": len(self._fits), "rounds": self._rounds_in_batch}
        )
        self.annotate(tests=len(self._fits))  # the round that decides the batch's tests
        self._fits = []
        self.runner.answer(np.asarray(pvalues, dtype=float))

    def _noisy_blocks(
        self, total: np.ndarray, replies: list[Reply], pending: list[NewtonState]
    ) -> np.ndarray:
        """A private round's sums on the lattice ``2**-f`` with the noise (the server's, or the
        sites' shares already in them), recorded by the accountant; each pending model learns
        the noise's variance (its ridge, its step slack and its LR test count it)."""
        assert self.privacy is not None and self._release is not None
        models, _, variance, shares, squared = self._release
        if not np.all(np.isfinite(total)):
            raise ClientProtocolError(f"{self.name}: the summed GLM blocks are not all finite")
        summed = len(replies[0].contributors) if len(replies) == 1 else len(replies)
        counts, actual, noted = self.privacy.release(
            total / self.resolution, summed, self.current_round, models, variance, shares,
            squared, self.resolution,
        )  # fmt: skip
        self.recorder.note_noise(self.current_round, GLM, noted)
        self.privacy.accountant.close_batch()
        noise = actual * self.resolution**2  # per summed entry, in the blocks' units
        for state in pending:
            state.sum_noise = noise
            state.objective_noise = 3.0 * float(np.sqrt(noise))
            state.ridge = max(self.options.ridge, 3.0 * float(np.sqrt(noise * state.n_params)))
        return counts * self.resolution

    def forget_pending_batch(self) -> None:
        self._fits = []

    def privacy_plan(self) -> dict[str, Any] | None:
        if self.privacy is None:
            return None
        sites = self.protocol_run.members.num_clients
        return self.privacy.plan(self.name, self.entry_point, self.secure_mode, sites)

    def stop_search(self, refusal: str) -> bool:
        return stop_search(self, refusal)

    def on_clients_dropped(self, dropped: list[int]) -> None:
        # A batch restarts with the survivors so no model mixes client sets.
        if self.privacy is not None and self._fits:
            raise ValueError(
                f"{self.name}: clients {dropped} dropped out of a private batch; its released "
                "rounds would be paid for again with the survivors, so the run stops here"
            )
        if self._fits:
            self._fits = []
            self.retract_request()

    # ------------------------------------------------------------------ result
    def result_payload(self) -> dict:
        assert self.runner is not None  # the search has run
        result = self.runner.result
        names = result.graph.names
        return {
            "graph": result.graph,
            "variables": list(names),
            **search_evidence(result),
            **self.missing_report(self.options.missing),
            **self.test_report(),
            **privacy_report(self.privacy, self.stopped),
        }

    def test_report(self) -> dict:
        """The result fields on the CI tests this run asked (shared by fedCI's subclasses)."""
        return {
            "tests": len(self.cache),
            "batches": self.batches,
            "ci_tests": [
                {
                    "x": r.x,
                    "y": r.y,
                    "given": list(r.given),
                    "p_value": r.p_value,
                    "df": list(r.df),
                    "clients": list(r.clients),
                    "n": r.n,
                }  # fmt: skip
                for r in self.tests.values()
            ],
        }


def secure_support(options: Mapping[str, Any]) -> str | None:
    """The GLM blocks travel as fixed-point digits in a secure run; local p-values cannot."""
    if options.get("ci") == "fisher":
        return "Fisher's combination collects each client's p-values, which cannot be summed"
    if options.get("encoding") == "float":
        return "encoding=float sends float64 blocks; use encoding=fixed (or auto) with SecAgg+"
    return None
