"""fedCI's federated CI tests, owned by no method: a likelihood-ratio test of two nested GLMs
fitted by federated IRLS (the clients' summed blocks), or Fisher's combination of the clients'
own p-values, inside the batched PC/FCI engine (Flower-free).

The tests are a federated CI test (:mod:`~fedcausal_flwr.strategies.ci_tests`),
:class:`GLMTests`: ``fedci-pc`` / ``fedci-fci`` (:mod:`fedcausal_flwr.strategies.fedci`) are
PC's or FCI's search over one (:data:`FEDCI_METHODS`, a
:class:`~fedcausal_flwr.strategies.search.SearchStrategy` each), and fedCI-IOD
(:mod:`fedcausal_flwr.strategies.fedci_iod`) holds one inside IOD's search over sites with
different variable sets.
Their options (:data:`FEDCI_PC_OPTIONS`, :data:`FEDCI_FCI_OPTIONS`) and SecAgg+ support are
declared here once; their wire protocol (payloads, replies, the fixed-point encoding) and
disclosures beside the actions, in :mod:`fedcausal_flwr.protocols.fedci`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from fedcausal_flwr.data.inputs import Fix, InputError
from fedcausal_flwr.data.schema import Schema, VariableSpec
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
from fedcausal_flwr.strategies.base import Options, ProtocolStrategy
from fedcausal_flwr.strategies.ci_tests import FederatedCITest
from fedcausal_flwr.strategies.search import SearchMethod
from fedcausal_flwr.strategies.search_stop import server_noise

if TYPE_CHECKING:
    from fedcausal_flwr.discovery.fci import FCIResult
    from fedcausal_flwr.discovery.pc import PCResult

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


class GLMTests(FederatedCITest):
    """fedCI's federated GLM CI tests (a federated CI test, :mod:`~.ci_tests`):
    fedCI-PC / fedCI-FCI's search (:class:`~fedcausal_flwr.strategies.search.SearchStrategy`)
    and fedCI-IOD's strategy each hold one. It turns a batch of the search's tests into requests
    and their replies into the batch's p-values, and holds the schema, every test asked
    (``cache``, ``tests``, ``batches``) and the server's side of differential privacy. It reads
    every fedCI option from ``options``; the strategy passed to a call supplies the run
    (clients, round, recorder).

    With ``dp``: each round is a release of the pending models' blocks, clipped row by row at
    the sites (``dp_clip``) and rounded to multiples of ``2**-f``; a batch runs at most
    ``dp_rounds`` IRLS rounds. The server reads the noisy sums as post-processing: it
    symmetrises the information, adds a ridge of ``3 sigma sqrt(P)`` (about the spectral norm of
    a P x P noise matrix), and tests each LR statistic against chi2 plus the noise of its two
    log-likelihoods (:func:`~fedcausal_flwr.stats.glm.noisy_chi2_sf`)."""

    ACTIONS = (GLM, LOCAL_LRT)

    def __init__(self, options: Options) -> None:
        super().__init__()
        self.options = options
        #: the server's side of a private run (None: dp off): lattice releases, for which
        #: dp_accounting has no PLD, stated in zCDP; ``dp_rounds`` IRLS rounds for each of
        #: ``dp_batches`` depths
        self.privacy = server_noise(
            options,
            int(options.dp_batches) * int(options.dp_rounds) if "dp_rounds" in options else None,
            "clipped GLM blocks",
            tight=False,
        )
        schema = options.schema  # checked Schema JSON, or None: kinds from the dtypes
        self.schema: Schema | None = None if schema is None else Schema.from_json(schema)
        #: the IRLS keywords of every fit (:func:`~fedcausal_flwr.stats.glm.new_state`)
        self.fit_options: dict[str, Any] = {"tol": options.tol, "max_iter": options.max_iter}
        #: how the GLM blocks travel (``fixed`` or ``float``), settled when the search starts
        self.encoding: str | None = None
        #: every test's fitted models and statistics, in the order asked
        self.tests: dict[Query, CITestResult] = {}
        #: the open batch: each test's query, its models' fits and the clients it asks
        self.fits: list[tuple[Query, list[NewtonState], tuple[int, ...]]] = []
        self.rounds_in_batch = 0
        #: the variables in the schema's order (a query's indices)
        self.names: list[str] = []
        #: the pending private release: (models, cells, noise variance, shares, sensitivity^2)
        self.release: tuple[int, int, float, int | None, float] | None = None

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

    def validate(self, info: dict[int, ClientInfo], entry_point: str) -> None:
        """The schema: inferred from the reports, or the given one, which must name every column."""
        if self.schema is None:
            self.schema = schema_from_hello(info, entry_point)
        names = self.schema.names
        for pid in sorted(info):
            unknown = [c for c in info[pid].columns if c not in names]
            if unknown:
                raise InputError(
                    f"has columns {unknown} that the schema does not declare",
                    client=pid,
                    fix="declare them in the schema or drop them",
                    entry_point=entry_point,
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

    def begin(self, strategy: ProtocolStrategy) -> list[str]:
        """When a search starts: the variables in the schema's order (returned), and the run's
        encoding (``auto``: fixed-point digits in a secure run, float64 otherwise)."""
        assert self.schema is not None  # validate has set it
        self.names = list(self.schema.names)
        encoding = self.options.encoding
        if encoding == "auto":
            encoding = "fixed" if strategy.secure_mode else "float"
        if encoding == "float" and strategy.secure_mode:
            raise ValueError("a secure run needs encoding='fixed' (or 'auto') for fedCI's blocks")
        self.encoding = encoding
        return self.names

    def _open_batch(
        self, strategy: ProtocolStrategy, queries: Sequence[Query], schema: Schema
    ) -> None:
        self.fits = []
        self.rounds_in_batch = 0
        for query in queries:
            x, y, s = (self.names[query[0]], self.names[query[1]],
                       [self.names[v] for v in query[2]])  # fmt: skip
            needed = [x, y, *s]
            clients = tuple(
                pid
                for pid in strategy.alive_clients
                if set(needed) <= set(strategy.client_info[pid].columns)
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
                noise = 16.0 * len(strategy.alive_clients) * 2.0**-self.options.fixed_fraction_bits
                for state in states:
                    state.objective_noise = noise
            self.fits.append((query, states, clients))

    # ------------------------------------------------------------------ protocol
    def request(self, strategy: ProtocolStrategy, queries: Sequence[Query]) -> Request:
        """The request for the search's pending batch ``queries``: the next IRLS round of its
        unfinished models (``glm``), or each client's own tests (``local_lrt``, Fisher's)."""
        assert self.schema is not None  # validate has set it
        if self.options.ci == "fisher":
            return self._fisher_request(queries, self.schema)
        if not self.fits:
            self._open_batch(strategy, queries, self.schema)
        pending = [s for _, states, _ in self.fits for s in states if not s.done]
        schema, models = self.schema.to_json(), [model_row(s.model) for s in pending]
        betas = np.concatenate([s.beta_eval for s in pending] + [np.zeros(0)])
        fixed = list(self._fixed_format(strategy)) if self.encoding == "fixed" else None
        privacy = None if self.privacy is None else self._charge_round(strategy, pending).encode()
        payload = GLMRequest(schema, self.options.missing, models, fixed, privacy)
        return Request(GLM, payload, arrays=[betas], secure=self.encoding == "fixed")

    def _charge_round(
        self, strategy: ProtocolStrategy, pending: list[NewtonState]
    ) -> PrivacyCharge:
        """A private round: its noise (the run's budget over its releases) for the pending
        models' clipped blocks, and the charge the sites log."""
        cells = sum(packed_size(s.n_params) for s in pending)
        clip, resolution = float(self.options.dp_clip), self.resolution
        if clip * max(strategy.n_total, 1) / resolution >= 2.0**62:  # the lattice holds any sum
            raise OptionError(
                f"{strategy.name}: dp_clip={clip:g} over {strategy.n_total:,} rows can sum to more "
                f"than the lattice of 2**-{self.options.fixed_fraction_bits} holds in 63 bits: "
                "lower dp_clip or fixed_fraction_bits"
            )
        squared = release_sensitivity2(len(pending), cells, clip, resolution)
        assert self.privacy is not None  # a private round
        variance, shares = self.privacy.batch_noise(
            strategy.name, squared, cells, len(strategy.alive_clients)
        )
        self.release = (len(pending), cells, variance, shares, squared)
        return self.privacy.charge(len(pending), cells, variance, shares, clip, resolution)

    def _fixed_format(self, strategy: ProtocolStrategy) -> tuple[int, int, int]:
        bits = digit_bits(strategy.secure_bound)
        return self.options.fixed_fraction_bits, bits, self.options.fixed_limbs

    def _fisher_request(self, queries: Sequence[Query], schema: Schema) -> Request:
        rows = [[self.names[q[0]], self.names[q[1]], [self.names[v] for v in q[2]]]
                for q in queries]  # fmt: skip
        payload = LocalLRTRequest(schema.to_json(), rows, self.options.ridge,
                                  self.options.missing, **self.fit_options)  # fmt: skip
        return Request(LOCAL_LRT, payload, nan_ok=True)

    def _answer_fisher(
        self,
        strategy: ProtocolStrategy,
        request: Request,
        replies: list[Reply],
        queries: Sequence[Query],
    ) -> np.ndarray:
        local = np.vstack([np.asarray(r.arrays[0], dtype=np.float64) for r in replies])
        sizes = np.vstack([np.asarray(r.arrays[1], dtype=np.int64) for r in replies])
        pids = [r.client for r in replies]
        pvalues = []
        asked = LocalLRTRequest.decode(request.payload)
        for i, (query, (x, y, s)) in enumerate(zip(queries, asked.tests, strict=True)):
            took_part = np.isfinite(local[:, i])
            if not took_part.any():
                raise ValueError(f"CI test {x} _||_ {y} | {s}: no client observes all of them")
            stat, df, p = fisher_combine(local[took_part, i])
            clients = tuple(pid for pid, ok in zip(pids, took_part, strict=True) if ok)
            n = int(sizes[took_part, i].sum())
            self.tests[query] = CITestResult(x, y, tuple(s), p, float("nan"), float("nan"), stat,
                                             stat, df, df, clients, n, 1)  # fmt: skip
            pvalues.append(p)
        self.batches.append({"round": strategy.current_round, "tests": len(pvalues), "rounds": 1})
        strategy.annotate(batch=len(self.batches) - 1, tests=len(pvalues))
        return np.asarray(pvalues, dtype=float)

    def answer(
        self, strategy: ProtocolStrategy, request: Request, replies: list[Reply],
        queries: Sequence[Query] | None,
    ) -> np.ndarray | None:  # fmt: skip
        """The replies to :meth:`request` for the batch ``queries``: its p-values once every
        model has finished, else None (another IRLS round is due)."""
        assert queries is not None  # the asked batch
        if request.action == LOCAL_LRT:
            return self._answer_fisher(strategy, request, replies, queries)
        pending = [s for _, states, _ in self.fits for s in states if not s.done]
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
            total = self._noisy_blocks(strategy, total, replies, pending)
        offset = 0
        for s in pending:
            size = packed_size(s.n_params)
            s.update(total[offset : offset + size])
            offset += size
        self.rounds_in_batch += 1
        if self.privacy is not None and self.rounds_in_batch >= self.options.dp_rounds:
            for _, states, _ in self.fits:  # the batch's releases are spent: last fits stand
                for state in states:
                    if not state.done:
                        state.status = "dp_rounds"
        strategy.annotate(batch=len(self.batches), models=len(pending))
        if any(not s.done for _, states, _ in self.fits for s in states):
            return None
        pvalues = []
        assert self.schema is not None  # set before the batch was asked
        for query, states, clients in self.fits:
            x, y = self.names[query[0]], self.names[query[1]]
            cond = [self.names[v] for v in query[2]]
            res = result_from_states(x, y, cond, states, self.schema, clients, self.rounds_in_batch)
            self.tests[query] = res
            pvalues.append(res.p_value)
        rounds = self.rounds_in_batch
        self.batches.append(
            {"round": strategy.current_round, "tests": len(self.fits), "rounds": rounds}
        )
        strategy.annotate(tests=len(self.fits))  # the round that decides the batch's tests
        self.fits = []
        return np.asarray(pvalues, dtype=float)

    def _noisy_blocks(
        self,
        strategy: ProtocolStrategy,
        total: np.ndarray,
        replies: list[Reply],
        pending: list[NewtonState],
    ) -> np.ndarray:
        """A private round's sums on the lattice ``2**-f`` with the noise (the server's, or the
        sites' shares already in them), recorded by the accountant; each pending model learns
        the noise's variance (its ridge, its step slack and its LR test count it)."""
        assert self.privacy is not None and self.release is not None
        models, _, variance, shares, squared = self.release
        if not np.all(np.isfinite(total)):
            raise ClientProtocolError(f"{strategy.name}: the summed GLM blocks are not all finite")
        summed = len(replies[0].contributors) if len(replies) == 1 else len(replies)
        counts, actual, noted = self.privacy.release(
            total / self.resolution, summed, strategy.current_round, models, variance, shares,
            squared, self.resolution,
        )  # fmt: skip
        strategy.recorder.note_noise(strategy.current_round, GLM, noted)
        self.privacy.accountant.close_batch()
        noise = actual * self.resolution**2  # per summed entry, in the blocks' units
        for state in pending:
            state.sum_noise = noise
            state.objective_noise = 3.0 * float(np.sqrt(noise))
            state.ridge = max(self.options.ridge, 3.0 * float(np.sqrt(noise * state.n_params)))
        return counts * self.resolution

    def forget(self) -> None:
        """Drop the open batch (its search will not finish it)."""
        self.fits = []

    def on_clients_dropped(self, strategy: ProtocolStrategy, dropped: list[int]) -> None:
        """An open batch restarts with the survivors so no model mixes client sets; a private
        one stops the run."""
        if self.privacy is not None and self.fits:
            raise ValueError(
                f"{strategy.name}: clients {dropped} dropped out of a private batch; its released "
                "rounds would be paid for again with the survivors, so the run stops here"
            )
        if self.fits:
            self.fits = []
            strategy.retract_request()

    # ------------------------------------------------------------------ result
    def report(self, result: PCResult | FCIResult | None = None) -> dict[str, Any]:
        """The result fields on the CI tests this run asked."""
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


#: the search -> the fedCI method it makes: PC's or FCI's search over :class:`GLMTests`
FEDCI_METHODS = {
    search: SearchMethod(name, options, search, GLMTests)
    for search, name, options in (
        ("pc", "fedci-pc", FEDCI_PC_OPTIONS),
        ("fci", "fedci-fci", FEDCI_FCI_OPTIONS),
    )
}


def secure_support(options: Mapping[str, Any]) -> str | None:
    """The GLM blocks travel as fixed-point digits in a secure run; local p-values cannot."""
    if options.get("ci") == "fisher":
        return "Fisher's combination collects each client's p-values, which cannot be summed"
    if options.get("encoding") == "float":
        return "encoding=float sends float64 blocks; use encoding=fixed (or auto) with SecAgg+"
    return None
