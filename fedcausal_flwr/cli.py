"""Command line: ``fedcausal-flwr COMMAND``, a thin wrapper over the Python API. ``--help``
lists every subcommand from its parser, so this docstring need not."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fedcausal_flwr import interrupts, notes, outputs
from fedcausal_flwr.options import (
    Option,
    OptionError,
    canonical,
    closest,
    show_value,
    spell,
)
from fedcausal_flwr.progress import ProgressLines
from fedcausal_flwr.settings import NETWORK_SETTINGS, RUN_SETTINGS, resolve_settings

#: ``fedcausal-flwr --help``'s description: plain text, argparse prints it as it is
DESCRIPTION = (
    "Federated causal discovery on Flower: run a method on benchmark networks or one CSV per "
    "site, compare methods, export learned graphs and report results."
)

#: ``run`` lists the learned edges up to this many (a wide graph's 100,000 lines help nobody on a
#: terminal: it is counted, and the export command named)
MAX_LISTED_EDGES = 500

RUN_USAGE = (
    "fedcausal-flwr run --method NAME (--network NET | --data CSV [CSV ...]) [run settings] "
    "[method options]\n       fedcausal-flwr run --config RESULT.json [overrides]"
)


def _help_text(option: Option) -> str:
    """An option's help line: what it does, what it takes, its default and the paper's value."""
    default = "(required)" if option.required else f"default {show_value(option.default)}"
    text = f"{option.help}; {option.describe_type()}; {default}"
    if option.paper:
        text += f"; paper: {option.paper}"
    return text.replace("%", "%%")


def _add_option_flag(group: argparse._ActionsContainer, option: Option) -> None:
    kwargs: dict[str, Any] = {"default": None, "dest": option.name, "help": _help_text(option)}
    if option.kind == "bool":
        kwargs.update(nargs="?", const="true", metavar="BOOL")
    else:
        kwargs["metavar"] = option.name.upper()
    group.add_argument(spell(option.name, "cli"), **kwargs)


def run_parser(method: str | None) -> argparse.ArgumentParser:
    """The ``run`` parser: run settings, data, output, and ``method``'s declared options."""
    from fedcausal_flwr.federation.core.registry import get_method

    parser = argparse.ArgumentParser(
        prog="fedcausal-flwr run",
        usage=RUN_USAGE,
        description="Run one federated method and print a summary. Options are validated "
        "before the first round; `fedcausal-flwr methods NAME` lists a method's options.",
        allow_abbrev=False,
    )
    parser.add_argument("--method", default=None, help="registered method (see `methods`)")
    parser.add_argument(
        "--config",
        default=None,
        metavar="RESULT.json",
        help="re-run a recorded result (its method, options, settings and data; the data "
        "fingerprint is checked); other flags override it",
    )
    parser.add_argument(
        "--data",
        nargs="+",
        default=None,
        metavar="CSV",
        help="one CSV per client: client 0 reads the first file, client 1 the second, ...",
    )
    parser.add_argument(
        "--sep",
        default=None,
        metavar="SEP",
        help="the --data files' delimiter (one character, tab or whitespace); default: sniffed "
        "among , ; tab | and whitespace",
    )
    parser.add_argument(
        "--keep-index",
        action="store_true",
        default=None,
        help="keep a first column that looks like a saved row index (named '', 'Unnamed: 0' "
        "or 'index', values 0..n-1 or 1..n) as a variable; default: such a column is an error",
    )
    parser.add_argument(
        "--truth", default=None, metavar="CSV", help="cause,effect edges for metrics"
    )
    parser.add_argument("--out", default=None, help="write the result JSON here")
    parser.add_argument(
        "--draw",
        default=None,
        metavar="FILE",
        help="draw the learned graph to FILE (.png, .svg or .pdf), against the truth when there "
        "is one",
    )
    parser.add_argument("--no-edges", action="store_true", help="do not print the learned edges")
    parser.add_argument(
        "--all-edges",
        action="store_true",
        help=f"print every learned edge (by default a graph of more than {MAX_LISTED_EDGES:,} "
        "edges is counted, not listed)",
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help="progress lines on stderr even when it is not a terminal (by default they go to a "
        "terminal only, once a run has taken 2 s)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress lines at all (wins over --progress)"
    )
    settings = parser.add_argument_group("run settings")
    for option in RUN_SETTINGS:
        _add_option_flag(settings, option)
    if method is not None:
        spec = get_method(method)
        group = parser.add_argument_group(
            f"{method} options", spec.description + (f" ({spec.paper})" if spec.paper else "")
        )
        for option in spec.options:
            if option.name in RUN_SETTINGS:  # the method's seed is the run's --seed
                continue
            _add_option_flag(group, option)
    return parser


def _unknown_flags(leftover: list[str], parser: argparse.ArgumentParser, method: str) -> str:
    """The error for flags the parser did not take: the closest valid flag and the lists."""
    from fedcausal_flwr.federation.core.registry import get_method, known_methods

    spec = get_method(method)
    flag = next((a for a in leftover if a.startswith("-")), leftover[0]).split("=")[0]
    if not flag.startswith("-"):
        return f"unexpected argument {flag!r} (options are --name value)"
    if any(canonical(flag) in get_method(m).options for m in known_methods()):
        return spec.options.unknown_message(flag, spec.owner, "cli")  # another method's option
    run_flags = [a for action in parser._actions for a in action.option_strings]
    method_flags = [spell(o.name, "cli") for o in spec.options if o.name not in RUN_SETTINGS]
    hint = closest(flag, run_flags + method_flags)
    if hint is not None and hint not in method_flags:
        return f"unknown option {flag!r} (did you mean {hint}?)"
    return spec.options.unknown_message(flag, spec.owner, "cli")


def _run_command(argv: list[str]) -> int:
    from fedcausal_flwr.api import execute

    parsed = _parse_run_command(argv)
    if parsed is None:  # --help was printed
        return 0
    method, args, recorded = parsed
    settings, options = _typed_run_options(args, method)
    _check_run_outputs(args)
    settings, options, data_args = _run_inputs(args, settings, options, recorded)
    show = None if args.quiet else ProgressLines(enabled=args.progress or None)
    state, failed = interrupts.RunState(show, out=args.out), outputs.FailedWrites()
    interrupts.on_interrupt(state.interrupted)
    try:  # the result is saved before it is scored: a scoring failure loses no run
        result = execute(
            method,
            settings,
            options,
            **data_args,
            entry_point="cli",
            announce=state.announce,
            progress=state,
            with_truth=None if args.draw is None else _drawer(args.draw, failed),
            on_result=state.save_first,
        )
    except Exception as err:
        if state.saved is None:
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"fedcausal-flwr: error: {message} (the run finished: its result, unscored, is in "
              f"{state.saved})", file=sys.stderr)  # fmt: skip
        return 1
    if args.out and not state.saved_as_is(result):  # saved before the summary: a reader that
        # stops early (| head) loses nothing
        unscored = f"; {args.out} holds it unscored" if state.saved else ""
        with failed.attempt(f"--out {args.out}", "the result", note=unscored):
            interrupts.save_result(result, args.out)
    print(result.summary())
    _print_edges(result, args)
    _print_run_notes(result, args, failed)
    return failed.report()  # a write that failed: one line each, exit code 1


def _parse_run_command(
    argv: list[str],
) -> tuple[str, argparse.Namespace, dict[str, Any] | None] | None:
    """``run``'s arguments: the method (given, or the recorded run's with ``--config``), the
    parsed arguments and the recorded run's arguments (:func:`~fedcausal_flwr.api.rerun_arguments`,
    None without ``--config``). None after printing ``--help`` (the method's options with one)."""
    from fedcausal_flwr.api import rerun_arguments
    from fedcausal_flwr.result import Result

    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--method", default=None)
    pre.add_argument("--config", default=None)
    pre.add_argument("-h", "--help", action="store_true")
    early, _ = pre.parse_known_args(argv)
    recorded = None
    if early.config is not None:
        recorded = rerun_arguments(Result.load(early.config).config)
        if early.method is not None and early.method != recorded["method"]:
            raise OptionError(
                f"--config {early.config} re-runs method {recorded['method']!r}; drop --method "
                f"{early.method} (or run that method without --config)"
            )
    method = early.method or (recorded["method"] if recorded else None)
    parser = run_parser(method)
    if early.help:
        parser.print_help()
        if method is None:
            print("\nadd --method NAME to see its options (or: fedcausal-flwr methods NAME)")
        return None
    if method is None:
        raise OptionError(
            "give --method NAME (see `fedcausal-flwr methods`) or --config RESULT.json"
        )
    args, leftover = parser.parse_known_args(argv)
    if leftover:
        raise OptionError(_unknown_flags(leftover, parser, method))
    return method, args, recorded


def _typed_run_options(
    args: argparse.Namespace, method: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run settings as parsed (None where not given) and the method's options that were
    given, keyed as typed on the command line."""
    from fedcausal_flwr.federation.core.registry import get_method

    settings = {o.name: getattr(args, o.name) for o in RUN_SETTINGS}
    spec_options = {o.name for o in get_method(method).options if o.name not in RUN_SETTINGS}
    options = {
        spell(name, "cli"): getattr(args, name)
        for name in spec_options
        if getattr(args, name) is not None
    }
    return settings, options


def _check_run_outputs(args: argparse.Namespace) -> None:
    """Check ``--draw`` and ``--out`` before any work (a run must not end in a write it cannot
    do), and that ``--no-edges`` and ``--all-edges`` are not both given."""
    if args.draw is not None and Path(args.draw).suffix.lower() not in (".png", ".svg", ".pdf"):
        raise OptionError(f"--draw {args.draw}: give a .png, .svg or .pdf file name")
    if args.no_edges and args.all_edges:
        raise OptionError("--no-edges and --all-edges contradict each other: give one")
    for flag, path, example in (("--out", args.out, "result.json"), ("--draw", args.draw, "g.png")):
        if path is not None:  # before any work: a run must not end in a write it cannot do
            outputs.check_file(path, f"{flag} {path}", example=example)


def _run_inputs(
    args: argparse.Namespace,
    settings: dict[str, Any],
    options: dict[str, Any],
    recorded: dict[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The run's settings, options and data arguments for :func:`~fedcausal_flwr.api.execute`
    (files, how to read them, the truth, the expected data fingerprint): as typed, and with
    ``--config`` the recorded run's for whatever was not typed."""
    files, truth, fingerprint = args.data, args.truth, None
    reading = {"sep": args.sep, "keep_index": args.keep_index}
    if recorded is not None:
        base = {k: v for k, v in recorded["settings"].items() if v is not None}
        if files is not None:  # the same data moved: read it there, the fingerprint decides
            base = {k: v for k, v in base.items() if k not in NETWORK_SETTINGS}
        settings = {**base, **{k: v for k, v in settings.items() if v is not None}}
        given = {canonical(k) for k in options}
        options = {
            **{spell(k, "cli"): v for k, v in recorded["options"].items() if k not in given},
            **options,
        }
        files = files if files is not None else recorded["files"]
        if files is not None:  # read the files as the recorded run did, unless told otherwise
            reading = {
                k: v if v is not None else recorded["reading"][k] for k, v in reading.items()
            }
        if truth is None and recorded["truth"] not in (None, "network", "graph"):
            truth = recorded["truth"]
        fingerprint = recorded["fingerprint"]
    data_args = {
        "files": files,
        "sep": reading["sep"],
        "keep_index": bool(reading["keep_index"]),
        "truth": truth,
        "expect_fingerprint": fingerprint,
    }
    return settings, options, data_args


def _print_edges(result: Any, args: argparse.Namespace) -> None:
    """List the learned graph's edges under the summary, unless ``--no-edges``; a graph with
    more than :data:`MAX_LISTED_EDGES` is counted instead, unless ``--all-edges``."""
    if result.graph is not None and not args.no_edges:
        n_edges = result.graph.n_edges()
        if n_edges > MAX_LISTED_EDGES and not args.all_edges:
            where = (
                f"`fedcausal-flwr export {args.out} --format edges` writes them"
                if args.out
                else "--out FILE keeps the result"
            )
            print(f"learned {result.graph.kind}, {n_edges:,} edges: not listed (over "
                  f"{MAX_LISTED_EDGES:,}; --all-edges lists them; {where})")  # fmt: skip
        else:
            lines = result.edge_lines(confidence=True)
            print(f"learned {result.graph.kind}, {len(lines)} edges" + (":" if lines else ""))
            for line in lines:
                print(f"  {line}")


def _print_run_notes(result: Any, args: argparse.Namespace, failed: outputs.FailedWrites) -> None:
    """The lines after the edges: where the graph was drawn, each dropped client, and where the
    result was written (a write that failed is told by ``failed`` instead)."""
    if args.draw and f"--draw {args.draw}" not in failed:
        print(f"  graph drawn to {args.draw}")
    for d in result.dropped_clients:
        print(f"  dropped client {d.get('client')} at round {d.get('round')}: {d.get('reason')}")
    if args.out and f"--out {args.out}" not in failed:
        print(f"  result written to {args.out}")


def _drawer(path: str, failed: outputs.FailedWrites) -> Callable[[Any, Any], None]:
    """``run --draw``: the learned graph against the truth it was scored with, if any."""

    def draw(result: Any, dag: Any) -> None:
        from fedcausal_flwr.plots import plot_graph_vs_truth, result_drawing

        if result.graph is None:
            raise OptionError(f"--draw {path}: {result.method} returned no single graph to draw")
        # in the view of the summary's metrics; the title names the run and the view
        learned, reference, title = result_drawing(result, dag)
        with failed.attempt(f"--draw {path}", "the graph", path):  # told after the summary
            plot_graph_vs_truth(learned, reference, path, title=title)

    return draw


def _networks(args: argparse.Namespace) -> int:
    from fedcausal_flwr.data import list_networks, load_network

    for name in list_networks():
        if args.describe:
            print(load_network(name))
        else:
            print(name)
    return 0


def _methods(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.core.registry import get_method, known_methods
    from fedcausal_flwr.method_reference import disclosure_rows, methods_markdown

    if args.markdown:
        print(methods_markdown(), end="")
        return 0
    if args.name is None:
        for name in known_methods():
            print(f"{name:16s} {get_method(name).description}")
        print("\n`fedcausal-flwr methods NAME` lists a method's options")
        return 0
    spec = get_method(args.name)
    print(f"{spec.name}: {spec.description}" + (f" ({spec.paper})" if spec.paper else ""))
    print("what its sites send (action: disclosure class; a site answers nothing else):")
    for action, kind in disclosure_rows(spec):
        print(f"  {action}: {kind}")
    if not len(spec.options):
        print("no options")
        return 0
    print("options (command line spelling; Python keywords and run-config keys use the same "
          "names with _ / -):")  # fmt: skip
    for name, values, default, help_text, paper in spec.options.table("cli"):
        print(f"  {name} {values}; default {default}")
        print(f"      {help_text}" + (f" [paper: {paper}]" if paper else ""))
    return 0


def _add_compare(sub: argparse._SubParsersAction) -> None:

    p = sub.add_parser(
        "compare",
        help="sweep methods x networks x K x seeds (resumable); results.csv, summary, plots",
        allow_abbrev=False,
    )
    p.add_argument(
        "--methods",
        required=True,
        help="comma list of method specs, e.g. fedpc,fedpc:ci=sketch,pc-vote,pooled",
    )
    p.add_argument(
        "--networks",
        required=True,
        help="comma list: benchmark names or er:d=20[:degree=2][:cards=2-5]",
    )
    p.add_argument("--clients", required=True, help="K values, e.g. 5,10,20 or 2-4")
    p.add_argument("--seeds", default="0", help="e.g. 0-4 or 0,3,7")
    for name in ("samples", "partition", "backend"):
        option = RUN_SETTINGS[name]
        p.add_argument(spell(name, "cli"), default=option.default, help=_help_text(option))
    p.add_argument("--jobs", type=int, default=1, help="parallel processes (each run independent)")
    p.add_argument("--out", default="results", help="output folder (runs/, results.csv, plots/)")
    p.add_argument(
        "--alpha", default=None, help="alpha of every method that has one (else a warning)"
    )
    p.add_argument("--test", default=None, help="test of every method that has one")
    p.add_argument("--max-depth", default=None, help="max_depth of every method that has one")
    p.add_argument("--metrics", default="shd,adj_f1,arrow_f1", help="summarised and plotted")
    p.add_argument("--graph-run", default=None, help="run key whose graph is drawn vs the truth")
    p.add_argument(
        "--no-plots",
        action="store_true",
        help="skip the PNG plots of the metrics (the report still draws each learned graph)",
    )
    p.add_argument("--retry-failed", action="store_true", help="re-run runs recorded as failed")
    p.add_argument(
        "--progress",
        action="store_true",
        help="progress on stderr even when it is not a terminal, a line per run (by default it "
        "goes to a terminal only)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress at all (wins over --progress)")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _compare(args: argparse.Namespace) -> int:
    from fedcausal_flwr.compare import compare

    options = {
        key: getattr(args, key)
        for key in ("alpha", "test", "max_depth")
        if getattr(args, key) is not None
    }
    from fedcausal_flwr.outputs import FailedWrites

    metrics = _split(args.metrics)
    interrupts.on_interrupt(lambda: interrupts.sweep_interrupted(args.out))
    unwritten = FailedWrites()  # told after the table: a full disk loses no run
    study = compare(
        methods=_split(args.methods),
        networks=_split(args.networks),
        clients=args.clients,
        samples=args.samples,
        partition=args.partition,
        seeds=args.seeds,
        backend=args.backend,
        jobs=args.jobs,
        out=args.out,
        options=options,
        metrics=metrics,
        plots=not args.no_plots,
        graph_run=args.graph_run,
        retry_failed=args.retry_failed,
        progress=False if args.quiet else args.progress or None,
        warn=lambda line: print(f"fedcausal-flwr: warning: {line}", file=sys.stderr),
        failed=unwritten,
    )
    print(study.summary_text(metrics))
    results = "" if "results.csv" in study.not_written else f"; results in {study.out}/results.csv"
    print(
        f"\n{study.n_planned} runs planned: {study.n_run} run now, {study.n_skipped} already "
        f"done, {study.n_failed} failed now{results}"
    )
    for path in study.plots:
        print(f"  plot: {path}")
    if study.report is not None:
        print(f"  report: {study.report}")
    failed = study.frame[study.frame["status"] != "ok"] if not study.frame.empty else study.frame
    for row in failed.itertuples():
        print(f"  failed: {row.key}: {row.error}")
    return max(1 if len(failed) else 0, unwritten.report())


def _add_experiment(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="run a named paper experiment (see --list)")
    p.add_argument("name", nargs="?", default=None, help="experiment name")
    p.add_argument("--list", action="store_true", help="list the named experiments")
    p.add_argument("--quick", action="store_true", help="a CI-sized variant (well under a minute)")
    p.add_argument("--full", action="store_true", help="the paper's full size (slow)")
    p.add_argument("--out", default=None, help="output folder (sweep experiments)")
    p.add_argument("--jobs", type=int, default=1)


def _experiment(args: argparse.Namespace) -> int:
    from fedcausal_flwr.experiments_registry import list_experiments, run_experiment

    if args.list or args.name is None:
        for exp in list_experiments():
            print(f"{exp.name:28s} v{exp.version}  {exp.description}")
        return 0
    if args.out is not None:
        outputs.check_folder(args.out, f"--out {args.out}")
    kept = "runs finished so far are kept in its output folder, run again to resume"
    interrupts.on_interrupt(lambda: f"experiment {args.name}: interrupted; {kept}")
    return run_experiment(args.name, quick=args.quick, full=args.full, out=args.out,
                          jobs=args.jobs)  # fmt: skip


def _add_export(sub: argparse._SubParsersAction) -> None:
    from fedcausal_flwr.graphs.export import EXPORT_FORMATS

    p = sub.add_parser(
        "export",
        help="write a result's learned graph in another tool's format",
        description="Write the learned graph of a result JSON (`run --out`) as DOT, GML, "
        "GraphML, pcalg's amat (CSV), causal-learn's endpoint matrix (CSV) or edge lines.",
    )
    p.add_argument("result", metavar="RESULT.json", help="a result written by `run --out`")
    p.add_argument("--format", required=True, choices=EXPORT_FORMATS, dest="fmt")
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="'-' for stdout; default: stdout for edges, else RESULT with the format's suffix",
    )


def _export(args: argparse.Namespace) -> int:
    from fedcausal_flwr.graphs.export import SUFFIXES, graph_text
    from fedcausal_flwr.result import Result

    source = Path(args.result)
    if not source.exists():
        raise OptionError(f"export {args.result}: no such file")
    result = Result.load(source)  # a folder or a file that is no result: one line naming it
    if result.graph is None:
        raise OptionError(f"export {args.result}: the {result.method} result holds no graph")
    graph = result.graph
    if args.out == "-" or (args.out is None and args.fmt == "edges"):
        sys.stdout.write(graph_text(graph, args.fmt))  # only the graph: stdout may be piped on
        return 0
    out = Path(args.out) if args.out else source.with_suffix(SUFFIXES[args.fmt])
    where = f"--out {out}" + ("" if args.out else " (the default)")
    outputs.check_file(out, where)
    failed = outputs.FailedWrites()
    with failed.attempt(where, f"the {args.fmt} file"):
        outputs.write_graph(graph, out, args.fmt)
    if where not in failed:
        print(f"{result.method}'s {graph.kind} ({graph.n_edges()} edges) written to {out}")
    return failed.report()


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="(re)write DIR/report.html, one self-contained page, from a compare or experiment "
        "results folder",
    )
    p.add_argument("dir", metavar="DIR", help="a folder written by compare or experiment")
    p.add_argument("--title", default=None, help="the page's heading (default: from the folder)")


def _report(args: argparse.Namespace) -> int:
    from fedcausal_flwr.report import REPORT_NAME, rebuild_page

    folder = Path(args.dir)
    if not folder.is_dir():
        raise OptionError(f"report {args.dir}: no such folder")
    path = outputs.check_file(folder / REPORT_NAME, f"report {args.dir}")
    page = rebuild_page(folder, args.title)  # or one line, and no stale page left
    failed = outputs.FailedWrites()
    with failed.attempt(f"report {args.dir}", str(path)):
        outputs.write_text(path, page)
    if not failed.lines:
        print(f"report written to {path}")
    return failed.report()


def _add_sample(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sample", help="write the rows `run --network` draws as one CSV per site "
                       "and truth.csv, read back by `run --data ... --truth ...`")  # fmt: skip
    for name in (*NETWORK_SETTINGS, "seed"):  # run's own flags, defaults and checks
        _add_option_flag(p, RUN_SETTINGS[name])
    p.add_argument("--out", required=True, metavar="DIR", help="folder of site0.csv, ... truth.csv")
    p.add_argument("--force", action="store_true", help="replace the files of an earlier sample")


def _sample(args: argparse.Namespace) -> int:
    from fedcausal_flwr.data.specs import write_sample

    if args.network is None:
        raise OptionError("give --network NET (see `fedcausal-flwr networks`) or er:d=<nodes>")
    outputs.check_folder(args.out, f"--out {args.out}")
    raw = {name: getattr(args, name) for name in (*NETWORK_SETTINGS, "seed")}
    settings = resolve_settings(raw, with_data=False, entry_point="cli")
    chosen = {name: settings[name] for name in raw}
    failed, lines = outputs.FailedWrites(), []
    with failed.attempt(f"--out {args.out}", "the sample"):
        lines = write_sample(**chosen, out=args.out, force=args.force, entry_point="cli")
    print(*lines, sep="\n")
    return failed.report()


def _federation(args: argparse.Namespace) -> int:
    from fedcausal_flwr.federation.deployment.localhost import federation_command
    from fedcausal_flwr.flwr_app import DEFAULT_RUN_CONFIG

    outputs.check_federation(args)  # before anything starts
    return federation_command(args, DEFAULT_RUN_CONFIG)


def main(argv: Sequence[str] | None = None) -> int:
    """``fedcausal-flwr``; a closed stdout (``| head``) ends any command quietly, exit 141."""
    try:
        try:
            return _main(list(sys.argv[1:] if argv is None else argv))
        finally:  # --help's SystemExit too: a closed pipe shows here, not at Python's exit
            sys.stdout.flush()
    except BrokenPipeError:
        return outputs.stdout_closed()


def _main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="fedcausal-flwr",
        description=DESCRIPTION,
        epilog="fedcausal-flwr COMMAND --help shows a command's options "
        "(run's depend on --method: fedcausal-flwr run --method NAME --help).",
    )
    sub = parser.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    sub.add_parser(
        "run",
        help="run one federated method and print a summary (see run --method NAME --help)",
        add_help=False,
    )
    nets = sub.add_parser("networks", help="list the embedded benchmark networks")
    nets.add_argument(
        "--describe", action="store_true", help="also parse and print node/edge counts"
    )
    methods = sub.add_parser("methods", help="list the registered methods, or one's options")
    methods.add_argument("name", nargs="?", default=None, help="a method: print its options")
    methods.add_argument(
        "--markdown", action="store_true", help="every method's options as Markdown tables"
    )
    _add_compare(sub)
    _add_experiment(sub)
    from fedcausal_flwr.citest_command import add_citest_parser, citest_command

    add_citest_parser(sub)
    _add_export(sub)
    _add_report(sub)
    from fedcausal_flwr.audit import add_audit_parser, audit_command

    add_audit_parser(sub)
    _add_sample(sub)
    from fedcausal_flwr.federation.deployment.localhost import add_federation_parser

    add_federation_parser(sub)
    handlers = {
        "networks": _networks,
        "methods": _methods,
        "compare": _compare,
        "experiment": _experiment,
        "citest": citest_command,
        "export": _export,
        "report": _report,
        "audit": audit_command,
        "sample": _sample,
        "federation": _federation,
    }
    # Ctrl-C / SIGTERM: one line, exit 130 / 143, no child process left (fedcausal_flwr.interrupts)
    # notes and warnings about the data: one line each
    with interrupts.Interrupts() as guard, notes.one_line_notes("fedcausal-flwr"):
        try:
            if argv and argv[0] == "run":  # its flags depend on the method: parsed in two steps
                return _run_command(argv[1:])
            args = parser.parse_args(argv)
            return handlers[args.command](args)
        except (ValueError, KeyError, OSError) as err:
            if not outputs.expected(err):  # an OSError naming no file: not the user's doing
                raise
            print(f"fedcausal-flwr: error: {outputs.error_text(err)}", file=sys.stderr)
            return 2
    return guard.exit_code


if __name__ == "__main__":
    sys.exit(main())
