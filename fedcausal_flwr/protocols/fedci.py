"""fedCI's actions, payloads, what each discloses, GLM model rows and the fixed-point digits of
its secure sums (fedCI-PC / fedCI-FCI and the IOD methods on its tests).

Wire protocol (after the built-in ``hello``). ``schema`` is the run's
:class:`~fedcausal_flwr.data.schema.Schema` as a JSON object (its ``to_json()``); ``models`` are
:func:`model_row` rows ``[response, predictors, site_effect, sites, rows]``; ``tests`` are rows
``[x, y, [S...]]`` of variable names. fedCI-PC / fedCI-FCI ask one ``glm`` round per IRLS iteration
for all unfinished models of a batch of CI tests, or with ``ci="fisher"`` one ``local_lrt`` round
per batch; the IOD methods ask them only of the sites observing a test's variables, and
``iod-pooled`` asks one ``raw_rows`` round instead (:mod:`fedcausal_flwr.protocols.pooled`).
Payload keys in wire order; every reply's meta is empty:

=============  =============  ===============================  ==========================  =======
action         methods        payload (record: keys) + arrays  reply (per client)          summed
=============  =============  ===============================  ==========================  =======
``glm``        fedci-pc,      ``GLMRequest``: ``schema,        float64: the packed blocks  float:
               fedci-fci,     missing, models, fixed``         ``[obj, ll, rss, n, Hb+g,   server;
               fedci-iod      (``fixed`` only when fixed       H]`` of every model,        fixed:
                              point) + float64 array 0:        concatenated; fixed point:  yes
                              the models' coefficient          one int64 digit vector
                              vectors, concatenated
``local_lrt``  fedci-pc/-fci  ``LocalLRTRequest``:             float64 p-value per test    no
               (fisher),      ``schema, tests, ridge,          (NaN where it lacks a
               iod-fisher     missing, tol, max_iter``         variable), int64 rows each
                                                               test used (0 there)
=============  =============  ===============================  ==========================  =======

With ``encoding="float"`` the server sums the float64 ``glm`` replies in partition order. With
``encoding="fixed"`` (the default whenever the run is secure) the ``glm`` request is a secure
(summed) request and the payload also carries ``fixed = [f, b, L]``: every client rounds each float
``v`` to the integer ``q = round(v * 2**f)`` and sends it as ``L`` balanced base-``2**b`` digits
(``q = sum_j d_j 2**(b j)``, ``|d_j| <= 2**(b-1) <= C``), digit-major, as one int64 vector
(:func:`encode_fixed`). ``b`` is the largest width whose digits respect the runtime's exact-sum
bound ``C`` (``n * 2C < 2**32``; :func:`digit_bits`), so SecAgg+ sums every digit exactly and the
server rebuilds ``sum_k q_k`` (float64, Horner: :func:`decode_fixed`) and divides by ``2**f``.
Precision lost: at most ``n_clients * 2**-(f+1)`` absolute per summed entry (defaults ``f = 30``:
< 5e-10 per client) plus float64 rounding; a value with ``|v| >= 2**(b L - 1 - f)`` cannot be
encoded and the client fails with a clear error naming the model (raise ``fixed_limbs``).

Differential privacy (``dp``, fedci-pc / fedci-fci): a ``glm`` request carries ``privacy``, its
:class:`~fedcausal_flwr.privacy.charges.PrivacyCharge` (``tables``: the models asked;
``clip``: the L2 bound of each row's contribution to each model, which the client applies;
``resolution``: ``2**-f``; ``cells``: the packed entries; ``variance``: the noise in units of the
resolution).
With distributed noise the client adds its share (a discrete Gaussian on the fixed-point
integers) before encoding the digits. The site logs the charge with its reply.

Missing values: ``missing`` travels in every ``glm`` and ``local_lrt`` request (``raw_rows``
carries only the schema). ``testwise`` gives each model the test's variables as ``rows`` (the
fifth field of a model row), so a client counts a test's four GLMs over its rows observed on x,
y and S; ``listwise`` makes each client drop its incomplete rows first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedcausal_flwr.federation.core import disclosure
from fedcausal_flwr.payload import Payload, optional
from fedcausal_flwr.protocols import pooled
from fedcausal_flwr.stats.glm import GLMModel

GLM = "glm"  # packed GLM blocks of every pending model at the broadcast coefficients
LOCAL_LRT = "local_lrt"  # the client's own LRT p-values (Fisher baseline)
ACTIONS = (GLM, LOCAL_LRT)

#: what each action of fedCI's tests discloses: GLM blocks are sums (through SecAgg+ in a secure
#: run); the Fisher baseline (ci=fisher) collects each client's own p-values
DISCLOSURES = {GLM: disclosure.SUM, LOCAL_LRT: disclosure.LOCAL}
#: iod-fisher: each site's own LRT p-values only
FISHER_DISCLOSURES = {LOCAL_LRT: disclosure.LOCAL}
#: iod-pooled: the sites' rows
POOLED_DISCLOSURES = pooled.DISCLOSURES

FIXED_FRACTION_BITS = 30  # default f: values travel as round(v * 2**f)
FIXED_LIMBS = 3  # default L: balanced base-2**b digits per value


@dataclass(frozen=True)
class GLMRequest(Payload):
    """``glm``: the packed blocks of each model (a :func:`model_row`) at the coefficients of
    array 0; ``fixed = [f, b, L]`` (fixed-point digits) only when the blocks are summed securely."""

    schema: dict
    missing: str
    models: list[list]
    fixed: list[int] | None = optional()
    #: a private run's charge for this request (:class:`~.records.PrivacyCharge`: the models'
    #: clip bound, the resolution, the noise; absent: none)
    privacy: dict[str, Any] | None = optional()


@dataclass(frozen=True)
class LocalLRTRequest(Payload):
    """``local_lrt``: the client's own LRT p-value of each test row ``[x, y, S]`` (Fisher)."""

    schema: dict
    tests: list[list]
    ridge: float
    missing: str
    tol: float
    max_iter: int


def model_row(model: GLMModel) -> list:
    """A model as the JSON row ``[response, predictors, site_effect, sites, rows]``."""
    return [
        model.response,
        list(model.predictors),
        model.site_effect,
        list(model.sites),
        list(model.rows),
    ]


def model_from_row(row: list) -> GLMModel:
    """The model of a :func:`model_row` row."""
    response, predictors, site_effect, sites, rows = row
    return GLMModel(
        str(response), tuple(predictors), str(site_effect), tuple(map(int, sites)), tuple(rows)
    )


def digit_bits(clip: int) -> int:
    """Largest ``b`` with balanced base-``2**b`` digits (``|d| <= 2**(b-1)``) within ``clip``."""
    if clip < 1:
        raise ValueError(f"secure bound must be >= 1, got {clip}")
    return int(clip).bit_length()  # 2**(b-1) <= clip < 2**b


def encode_fixed(values: np.ndarray, fraction_bits: int, bits: int, limbs: int) -> np.ndarray:
    """Floats -> int64 digits (digit-major, ``limbs * len(values)``); exact float arithmetic.

    Raises :class:`OverflowError` if some ``|round(v 2**f)|`` needs more than ``limbs`` digits.
    """
    values = np.asarray(values, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise OverflowError("non-finite value in the GLM blocks")
    q = np.rint(np.ldexp(values, fraction_bits))  # integral float, exact (power-of-two scaling)
    base = float(2**bits)
    digits = np.empty((limbs, q.size), dtype=np.int64)
    for j in range(limbs):  # limbs is tiny (<= 4); the vectors are the work
        high = np.rint(q / base)  # exact: q / base is a power-of-two scaling
        low = q - high * base  # exact: an integer with |low| <= base / 2
        digits[j] = low.astype(np.int64)
        q = high
    if np.any(q != 0):
        worst = float(np.max(np.abs(values)))
        raise OverflowError(
            f"|value| up to {worst:.3g} does not fit {limbs} digits of {bits} bits at "
            f"2**{fraction_bits} (limit ~2**{bits * limbs - 1 - fraction_bits}); raise fixed_limbs"
        )
    return digits.ravel()


def decode_fixed(summed: np.ndarray, fraction_bits: int, bits: int, limbs: int) -> np.ndarray:
    """Summed digits -> float sums (Horner over digits, then ``/ 2**f``)."""
    digits = np.asarray(summed, dtype=np.int64).reshape(limbs, -1).astype(np.float64)
    total = np.zeros(digits.shape[1])
    for j in reversed(range(limbs)):
        total = total * 2.0**bits + digits[j]
    return np.ldexp(total, -fraction_bits)
