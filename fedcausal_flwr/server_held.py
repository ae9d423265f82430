"""What the server held in a run, read from the run's own record (Flower-free).

A method declares once what each of its actions discloses
(:mod:`fedcausal_flwr.federation.core.disclosure`); the run decides what the server then holds.
An action declared ``summed`` reaches the server as the sum alone only when SecAgg+ sums it
(``secure``); in a plain run the server receives every client's reply and adds them up itself.
Noise does not change what the server received: with ``dp=central`` the server adds it to the
noiseless sum it holds; with ``dp=distributed`` each site adds its share before SecAgg+, so the
server never holds a noiseless sum.

The labels and sentences here are derived from what the record says the run did (the ledger's
``secure`` flag per message, ``config["run"]["secure"]``, the ``dp`` option and the noise noted on
each ledger entry), never from what the method could do in another mode: a record that does not
say whether SecAgg+ ran reads "not recorded", never "sum". The report's "What the server received"
and :meth:`~fedcausal_flwr.result.Result.summary` read them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

#: who added a private run's noise: the server (to the sum it held) or each site (its share)
CENTRAL, DISTRIBUTED = "central", "distributed"
#: the record does not say (whether SecAgg+ ran, or who added the noise)
NOT_RECORDED = "not recorded"
#: what the server held of one kind of message
EACH = "each client's"
SUMMED_BY_SERVER = "each client's, summed by the server"
SUM_ONLY = "sum only (SecAgg+)"
NOISY_SUM_ONLY = "noisy sum only (SecAgg+)"
#: how noise changes the label of what the server held
NOISE_NOTE = {
    CENTRAL: ", then noised by the server",
    NOT_RECORDED: ", noise added by whom not recorded",
}

#: the report's key to the labels above
LEGEND = (
    f"“{EACH}”: the server received every client's message; “{SUMMED_BY_SERVER}”: a message "
    "the method only needs summed, in a run without SecAgg+, so the server received every "
    f"client's reply and added them up itself; “{SUM_ONLY}”: SecAgg+ ran and only the "
    f"element-wise sum over the clients reached the server; “{NOISY_SUM_ONLY}”: each site added "
    "its share of the noise before SecAgg+, so the server never held a noiseless sum; “then "
    "noised by the server”: the server held the noiseless sum (or every reply) and added the "
    f"noise itself; “{NOT_RECORDED}”: the run record does not say whether SecAgg+ ran."
)


def record_secure(config: Mapping[str, Any] | None) -> bool | None:
    """Whether the run asked for SecAgg+ (``config["run"]["secure"]``; None: not recorded)."""
    value = ((config or {}).get("run") or {}).get("secure")
    return value if isinstance(value, bool) else None


def recorded_sums(config: Mapping[str, Any] | None) -> list[str] | None:
    """The actions the run's method declares only their sum is needed of, as the run recorded
    them (``config["summed_actions"]``; None: an older record, without them)."""
    value = (config or {}).get("summed_actions")
    return [str(a) for a in value] if isinstance(value, list) else None


def dp_mode(config: Mapping[str, Any] | None) -> str | None:
    """The run's ``dp`` option (``central``, ``distributed``; None: off or not an option)."""
    value = ((config or {}).get("options") or {}).get("dp")
    return value if value in (CENTRAL, DISTRIBUTED) else None


def entry_secure(entry: Mapping[str, Any], run_secure: bool | None) -> bool | None:
    """Whether SecAgg+ summed this ledger entry's message: its own flag; else False in a run
    recorded as plain (nothing went through SecAgg+); else not recorded (None)."""
    value = entry.get("secure")
    if isinstance(value, bool):
        return value
    return False if run_secure is False else None


def entry_noise(entry: Mapping[str, Any], dp: str | None) -> str | None:
    """Who added noise to this entry's sum: :data:`CENTRAL`, :data:`DISTRIBUTED`,
    :data:`NOT_RECORDED` (noise, but no ``dp`` option in the record), or None: no noise, or
    noise of variance 0 (``dp_epsilon=inf`` protects nothing, so nothing is said)."""
    noise = entry.get("noise")
    if not isinstance(noise, Mapping):
        return None
    try:
        variance = float(noise.get("variance") or 0.0)
    except (TypeError, ValueError):
        return NOT_RECORDED
    if not variance > 0:
        return None
    return dp or NOT_RECORDED


def held_label(summed: bool | None, secure: bool | None, noise: str | None = None) -> str:
    """What the server held of one message: ``summed``: the method needs only its sum over the
    clients (None: not recorded); ``secure``: SecAgg+ summed it (None: not recorded);
    ``noise``: who added noise to the sum (:func:`entry_noise`)."""
    if summed is False:
        return EACH  # never summed: every client's reply, whatever the mode
    if secure is None:
        return NOT_RECORDED
    note = NOISE_NOTE.get(noise or "", "")
    if secure:
        return NOISY_SUM_ONLY if noise == DISTRIBUTED else SUM_ONLY + note
    if summed is None:
        return EACH
    return SUMMED_BY_SERVER + (", each with its noise share" if noise == DISTRIBUTED else note)


def held_by_kind(
    ledger: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    summed_kinds: Collection[str] | None = None,
) -> list[tuple[str, str, list[Mapping[str, Any]]]]:
    """``(kind, label, entries)`` per message kind and what the server held of it, in order of
    first appearance (a kind held differently in different rounds has a row per label).
    ``summed_kinds``: the actions the method declares ``summed`` (None: those the record keeps,
    :func:`recorded_sums`; else each entry's own ``summed`` flag)."""
    run_secure, dp = record_secure(config), dp_mode(config)
    if summed_kinds is None:
        summed_kinds = recorded_sums(config)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for entry in ledger:
        kind = str(entry.get("kind", "?"))
        if summed_kinds is not None:
            summed: bool | None = kind in summed_kinds
        else:
            flag = entry.get("summed")
            summed = flag if isinstance(flag, bool) else None
        label = held_label(summed, entry_secure(entry, run_secure), entry_noise(entry, dp))
        groups.setdefault((kind, label), []).append(entry)
    return [(kind, label, entries) for (kind, label), entries in groups.items()]


def run_mode(
    config: Mapping[str, Any] | None, ledger: Sequence[Mapping[str, Any]]
) -> tuple[bool | None, str | None]:
    """``(secure, noise)`` of a run: whether SecAgg+ ran (the run settings, else the ledger's
    flags when every entry has one; None: not recorded) and who added noise (None: nobody)."""
    secure = record_secure(config)
    if secure is None and ledger and all(isinstance(e.get("secure"), bool) for e in ledger):
        secure = any(e["secure"] for e in ledger)
    dp = dp_mode(config)
    placed = {entry_noise(e, dp) for e in ledger} - {None}
    noise = placed.pop() if len(placed) == 1 else (NOT_RECORDED if placed else None)
    return secure, noise


def run_sentence(secure: bool | None, noise: str | None = None) -> str:
    """One sentence: what the server held in a run of this mode (:func:`run_mode`)."""
    if secure is None:
        return (
            "This run record does not say whether SecAgg+ ran, so what the server held of the "
            "messages a method only needs summed is not recorded."
        )
    if not secure:
        text = (
            "Plain run (no SecAgg+): the server held every client's reply, including those the "
            "method only needs summed."
        )
        if noise == CENTRAL:
            text += " It added the noise to their sum itself (dp=central)."
        elif noise:
            text += " Noise was added; the record does not say by whom."
        return text
    text = (
        f"Secure run: SecAgg+ summed the messages marked “{SUM_ONLY}”, so the server held only "
        "their sum over the clients; every other message reached it as each client's."
    )
    if noise == CENTRAL:
        text += (
            " The server added the noise to the sums it held (dp=central): it held them noiseless."
        )
    elif noise == DISTRIBUTED:
        text += (
            " Each site added its share of the noise before SecAgg+ (dp=distributed): the "
            "server never held a noiseless sum."
        )
    elif noise:
        text += " Noise was added; the record does not say by whom."
    return text


def held_line(
    ledger: Sequence[Mapping[str, Any]],
    config: Mapping[str, Any] | None = None,
    summed_kinds: Collection[str] | None = None,
) -> str:
    """One console line: each label with the message kinds the server held that way."""
    kinds: dict[str, list[str]] = {}
    for kind, label, _ in held_by_kind(ledger, config, summed_kinds):
        kinds.setdefault(label, [])
        if kind not in kinds[label]:
            kinds[label].append(kind)
    return "what the server held: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in kinds.items())
