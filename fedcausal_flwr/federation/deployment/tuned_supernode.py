"""``fedcausal-supernode``: Flower's ``flower-supernode`` with its hard-coded waits shortened.

Flower 1.42's SuperNode loop sleeps 3 s after every pull from the SuperLink that brought no
message, looks for the ClientApp's reply (and for its objects) every 0.5 s, and asks the SuperLink
again for a message's objects not there yet after 1 s (doubling); none of it is configurable. So a
message waits on average 1.5 s before a SuperNode even sees it, and its reply up to 0.5 s more.
This command runs Flower's own ``flower-supernode`` (the same arguments, TLS, authentication and
isolation modes; every argument but the four below is passed to it) after
:func:`~.flower_internals.tune_supernode_waits` has replaced, in that one loop module only, the
3 s sleep by ``--idle-poll``, the 0.5 s sleeps by ``--reply-wait`` and the object-pull backoff by
``--object-backoff``. With ``--wake-fifo PATH`` (the same path as its executor's) it writes a byte
to that named pipe each time it has stored a message, so the executor claims the task at once
instead of asking many times a second (:mod:`~.wake_fifo`). It refuses to start on a Flower whose
loop does not have exactly those sleeps and calls. The price: an idle SuperNode asks the SuperLink
for messages every ``--idle-poll`` seconds (5 requests a second by default) instead of every 3 s.

Run it with ``--isolation process`` and :mod:`fedcausal-executor <.warm_executor>` next to it
(``experiments/bench_deployment.py`` measures the rounds against the stock commands)::

    fedcausal-supernode --insecure --superlink <coordinator>:9092 --isolation process \\
        --port 9094 --node-config "partition-id=0 data-path='/data/site0.csv'"
    fedcausal-executor --insecure --runtime-api-address 127.0.0.1:9094

(add ``--wake-fifo /var/run/site0.wake`` to both commands for the wake-ups).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial

import fedcausal_flwr.environment  # noqa: F401 - NO_PHONING_OUT is set before Flower is imported
from fedcausal_flwr.federation.deployment.wake_fifo import wake
from fedcausal_flwr.federation.runtime import flower_internals

DEFAULT_IDLE_POLL = 0.2  # seconds after an empty pull (Flower: 3)
DEFAULT_REPLY_WAIT = 0.02  # seconds between looks for a reply (Flower: 0.5)
DEFAULT_OBJECT_BACKOFF = 0.02  # seconds before re-pulling a message's objects (Flower: 1)


def _positive(text: str) -> float:
    value = float(text)
    if not 0 < value <= 60:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 60], got {text}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fedcausal-supernode",
        add_help=False,
        allow_abbrev=False,  # an abbreviation of one of Flower's options stays Flower's
        description="flower-supernode with shorter waits; other arguments go to flower-supernode",
    )
    p.add_argument(
        "--idle-poll",
        type=_positive,
        default=DEFAULT_IDLE_POLL,
        help=f"seconds between pulls while no message comes (Flower: "
        f"{flower_internals.SUPERNODE_IDLE_SLEEP}; default {DEFAULT_IDLE_POLL})",
    )
    p.add_argument(
        "--reply-wait",
        type=_positive,
        default=DEFAULT_REPLY_WAIT,
        help=f"seconds between looks for the ClientApp's reply (Flower: "
        f"{flower_internals.SUPERNODE_REPLY_SLEEP}; default {DEFAULT_REPLY_WAIT})",
    )
    p.add_argument(
        "--object-backoff",
        type=_positive,
        default=DEFAULT_OBJECT_BACKOFF,
        help="seconds before asking the SuperLink again for a message's objects not there yet, "
        f"doubling up to 0.5 s (Flower: 1 s, up to 10 s; default {DEFAULT_OBJECT_BACKOFF})",
    )
    p.add_argument(
        "--wake-fifo",
        metavar="PATH",
        default=None,
        help="named pipe of this SuperNode's fedcausal-executor (its --wake-fifo): a byte is "
        "written to it when a message arrives, so the executor claims it at once",
    )
    return p


def _value_of(arguments: Sequence[str], option: str) -> str | None:
    """The value given to ``option`` (``--opt value`` or ``--opt=value``), else None."""
    for k, item in enumerate(arguments):
        if item == option and k + 1 < len(arguments):
            return arguments[k + 1]
        if item.startswith(option + "="):
            return item.split("=", 1)[1]
    return None


def check_security_files(arguments: Sequence[str]) -> None:
    """Refuse a missing or invalid SuperNode key or CA file, naming the option, before Flower
    starts (Flower answers a wrong path with a traceback)."""
    from fedcausal_flwr.federation.deployment.credentials import check_certificate, check_node_key

    key = _value_of(arguments, "--auth-supernode-private-key")
    if key is not None:
        check_node_key(key)
    ca = _value_of(arguments, "--root-certificates")
    if ca is not None:
        check_certificate(ca, "CA certificate", "--root-certificates")


def main(argv: Sequence[str] | None = None) -> None:
    args, rest = parser().parse_known_args(sys.argv[1:] if argv is None else list(argv))
    if "-h" in rest or "--help" in rest:
        parser().print_help()
        print("\nflower-supernode's own arguments:\n")
    try:
        check_security_files(rest)
    except (OSError, ValueError) as error:
        sys.exit(f"fedcausal-supernode: {error}")
    try:
        waits = flower_internals.tune_supernode_waits(
            args.idle_poll,
            args.reply_wait,
            args.object_backoff,
            on_message=None if args.wake_fifo is None else partial(wake, args.wake_fifo),
        )
    except ImportError as error:
        sys.exit(f"fedcausal-supernode: {error}")
    sys.argv = ["flower-supernode", *rest]
    if not ("-h" in rest or "--help" in rest):
        print(
            "fedcausal-supernode: flower-supernode with "
            + ", ".join(f"{what} -> {new:g} s" for what, new in waits.items())
            + ("" if args.wake_fifo is None else f"; wakes its executor through {args.wake_fifo}"),
            flush=True,
        )
    flower_internals.run_flower_supernode()


if __name__ == "__main__":  # pragma: no cover
    main()
