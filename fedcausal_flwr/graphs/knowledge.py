"""Background knowledge: forbidden and required directed edges, and tiers (a temporal order).

The meaning is causal-learn's ``BackgroundKnowledge``: ``a -> b`` is forbidden if it is listed as
forbidden or if ``a`` sits in a later tier than ``b``; it is required if listed as required. PC
uses it (:func:`~fedcausal_flwr.discovery.pc.pc_steps`) as follows:

* a pair forbidden in both directions is removed before any test and never tested;
* a required edge is never tested and never removed;
* after the skeleton, every undirected edge one of whose directions is forbidden or required is
  oriented accordingly, before the colliders;
* no collider and no Meek rule orients ``a -> b`` when that is forbidden or ``b -> a`` required.

The file format (``--knowledge FILE``): one statement per line, ``#`` starts a comment, names
separated by spaces or commas (quote a name that has either)::

    forbidden A -> B      # no edge A -> B; B -> A stays possible
    forbidden A -- B      # no edge between A and B
    required C -> D       # the edge C -> D, kept and oriented
    tier E, F             # the first tier line is the earliest tier
    tier G H              # no arrow from a later tier into an earlier one
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np


class KnowledgeError(ValueError):
    """Knowledge that cannot be read or that no DAG satisfies; ``plain`` says where and what
    without a name or a statement of the knowledge (for knowledge from a run config, whose errors
    reach the submitter: see :meth:`Knowledge.parse`)."""

    def __init__(self, message: str, plain: str) -> None:
        super().__init__(message)
        self.plain = plain


@dataclass(frozen=True)
class Knowledge:
    """Background knowledge over variable names (see the module docstring)."""

    forbidden: tuple[tuple[str, str], ...] = ()  # (a, b): a -> b is forbidden
    required: tuple[tuple[str, str], ...] = ()  # (a, b): a -> b is required
    tiers: tuple[tuple[str, ...], ...] = ()  # earliest first
    sources: dict[tuple[str, str, str], str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        seen: dict[str, int] = {}
        for number, tier in enumerate(self.tiers, start=1):
            for name in tier:
                if name in seen:
                    where = self._where("tier", name, "")
                    raise KnowledgeError(
                        f"{where}variable {name!r} is in tier {seen[name]} and in tier {number}",
                        f"{where}a variable is in two tiers",
                    )
                seen[name] = number
        for a, b in self.required:
            where = self._where("required", a, b)
            if a == b:
                raise KnowledgeError(
                    f"{where}required edge {a} -> {a}", f"{where}a required edge is a loop"
                )
            if self.is_forbidden(a, b):
                why = "forbidden" if (a, b) in self.forbidden else "against the tiers"
                raise KnowledgeError(
                    f"{where}required edge {a} -> {b} is {why}", f"{where}a required edge is {why}"
                )
            if (b, a) in self.required:
                raise KnowledgeError(
                    f"{where}{a} -> {b} and {b} -> {a} are both required",
                    f"{where}an edge is required both ways",
                )
        cycle = required_cycle(self.required)
        if cycle:
            where = self._where("required", cycle[0], cycle[1])
            shown = " -> ".join([*cycle, cycle[0]])
            tail = "; a DAG has none: drop one of them"
            raise KnowledgeError(
                f"{where}the required edges form the directed cycle {shown}{tail}",
                f"{where}the required edges form a directed cycle{tail}",
            )

    def _where(self, kind: str, a: str, b: str) -> str:
        source = self.sources.get((kind, a, b))
        return f"{source}: " if source else ""

    def tier_of(self, name: str) -> int | None:
        for number, tier in enumerate(self.tiers):
            if name in tier:
                return number
        return None

    def is_forbidden(self, a: str, b: str) -> bool:
        """Is ``a -> b`` forbidden (listed, or a later tier into an earlier one)?"""
        if (a, b) in self.forbidden:
            return True
        ta, tb = self.tier_of(a), self.tier_of(b)
        return ta is not None and tb is not None and ta > tb

    def is_required(self, a: str, b: str) -> bool:
        return (a, b) in self.required

    def check_variables(self, variables: Sequence[str]) -> None:
        """Refuse a name the data does not have (naming the statement's source)."""
        known = set(variables)
        statements = [("forbidden", a, b) for a, b in self.forbidden]
        statements += [("required", a, b) for a, b in self.required]
        statements += [("tier", v, "") for tier in self.tiers for v in tier]
        for kind, a, b in statements:
            for name in (a, b) if b else (a,):
                if name not in known:
                    raise ValueError(
                        f"{self._where(kind, a, b)}knowledge names variable {name!r}, which the "
                        f"data does not have (its variables: {', '.join(variables)})"
                    )

    def matrix(self, variables: Sequence[str]) -> KnowledgeMatrix:
        """The knowledge over the variables' positions."""
        self.check_variables(variables)
        index = {v: i for i, v in enumerate(variables)}
        p = len(variables)
        forbidden = np.zeros((p, p), dtype=bool)
        for a, b in self.forbidden:
            forbidden[index[a], index[b]] = True
        tier = np.full(p, -1)
        for number, names in enumerate(self.tiers):
            tier[[index[v] for v in names]] = number
        placed = tier >= 0
        forbidden |= np.outer(placed, placed) & (tier[:, None] > tier[None, :])
        required = np.zeros((p, p), dtype=bool)
        for a, b in self.required:
            required[index[a], index[b]] = True
        return KnowledgeMatrix(forbidden, required)

    def to_text(self) -> str:
        """The file format (names quoted where needed); :meth:`parse` reads it back."""

        def name(v: str) -> str:
            return v if v and not any(c in v for c in " ,\t\"'#") else '"' + v + '"'

        lines = [f"forbidden {name(a)} -> {name(b)}" for a, b in self.forbidden]
        lines += [f"required {name(a)} -> {name(b)}" for a, b in self.required]
        lines += ["tier " + " ".join(name(v) for v in tier) for tier in self.tiers]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str, source: str = "knowledge", quote: bool = True) -> Knowledge:
        """Read the file format of the module docstring; errors name ``source`` and the line.

        ``quote=False`` (statements from a run config, whose errors reach whoever submitted the
        run): errors name the line and the problem, never a word of the text.
        """
        forbidden: list[tuple[str, str]] = []
        required: list[tuple[str, str]] = []
        tiers: list[tuple[str, ...]] = []
        sources: dict[tuple[str, str, str], str] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            at = f"{source}, line {number}"  # a statement's own error names its line
            where = f"{at} ({line.strip()!r})" if quote else at
            try:
                lexer = shlex.shlex(line, posix=True)
                lexer.whitespace += ","
                lexer.whitespace_split = True
                lexer.commenters = "#"
                words = list(lexer)
            except ValueError as exc:  # shlex says what, not where: "No closing quotation"
                raise _line_error(at, str(exc), "", quote) from None
            if not words:
                continue
            kind, rest = words[0].lower(), words[1:]
            if kind == "tier":
                if not rest:
                    raise _line_error(at, "a tier line names at least one variable", "", quote)
                tiers.append(tuple(rest))
                sources.update({("tier", v, ""): where for v in rest})
                continue
            if (
                kind not in ("forbidden", "required")
                or len(rest) != 3
                or rest[1]
                not in (
                    "->",
                    "--",
                )
            ):
                raise _line_error(
                    at,
                    "expected 'forbidden A -> B', 'forbidden A -- B', 'required A -> B' or "
                    "'tier A B ...'",
                    f", got {line.strip()!r}",
                    quote,
                )
            a, arrow, b = rest
            if a == b:
                raise _line_error(
                    at, "an edge needs two different variables", f", got {a!r} twice", quote
                )
            if kind == "required" and arrow == "--":
                raise _line_error(
                    at, "a required edge has a direction", f": 'required {a} -> {b}'", quote
                )
            pairs = [(a, b)] if arrow == "->" else [(a, b), (b, a)]
            (forbidden if kind == "forbidden" else required).extend(pairs)
            sources.update({(kind, x, y): where for x, y in pairs})
        try:
            return cls(
                tuple(dict.fromkeys(forbidden)),
                tuple(dict.fromkeys(required)),
                tuple(tiers),
                sources,
            )
        except KnowledgeError as err:
            if quote:
                raise
            raise KnowledgeError(err.plain, err.plain) from None

    @classmethod
    def read(cls, path: str | Path) -> Knowledge:
        file = Path(path)
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(
                f"cannot read the knowledge file {str(path)!r}: {exc.strerror}"
            ) from None
        return cls.parse(text, source=f"knowledge file {file.name}")

    @classmethod
    def from_edges(
        cls,
        forbidden: Iterable[tuple[str, str]] = (),
        required: Iterable[tuple[str, str]] = (),
        tiers: Iterable[Iterable[str]] = (),
    ) -> Knowledge:
        """From Python: directed pairs ``(a, b)`` for ``a -> b``, and tiers earliest first."""
        return cls(
            tuple(dict.fromkeys((str(a), str(b)) for a, b in forbidden)),
            tuple(dict.fromkeys((str(a), str(b)) for a, b in required)),
            tuple(tuple(str(v) for v in tier) for tier in tiers),
        )


def _line_error(at: str, problem: str, shown: str, quote: bool) -> KnowledgeError:
    """A statement's error: its line and problem, plus ``shown`` (words of the text) only when
    the text may be quoted."""
    return KnowledgeError(f"{at}: {problem}{shown if quote else ''}", f"{at}: {problem}")


def required_cycle(edges: Sequence[tuple[str, str]]) -> list[str]:
    """A directed cycle of ``edges`` as its variables in order (``[]``: none), so knowledge no
    DAG can satisfy is refused when it is read, not met as a wrong graph."""
    children: dict[str, list[str]] = {}
    for a, b in edges:
        children.setdefault(a, []).append(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in children:
        if state.get(root):
            continue
        path, stack = [root], [iter(children[root])]
        state[root] = 1
        while stack:
            child = next(stack[-1], None)
            if child is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(child) == 1:
                return path[path.index(child) :]
            elif not state.get(child):
                state[child] = 1
                path.append(child)
                stack.append(iter(children.get(child, ())))
    return []


@dataclass(frozen=True)
class KnowledgeMatrix:
    """Knowledge over variable positions: ``forbidden[a, b]``, ``required[a, b]`` for a -> b
    (the derived matrices are computed once: the collider and Meek loops read them per triple)."""

    forbidden: np.ndarray
    required: np.ndarray

    @cached_property
    def no_edge(self) -> np.ndarray:
        """Pairs forbidden both ways: removed before any test."""
        return self.forbidden & self.forbidden.T

    @cached_property
    def kept(self) -> np.ndarray:
        """Pairs with a required edge: never tested, never removed."""
        return self.required | self.required.T

    @cached_property
    def vetoed(self) -> np.ndarray:
        """``[a, b]``: no rule may orient ``a -> b`` (forbidden, or ``b -> a`` required)."""
        return self.forbidden | self.required.T


def orient_by_knowledge(marks: np.ndarray, knowledge: KnowledgeMatrix) -> list[tuple[int, int]]:
    """Orient each undirected edge one of whose directions is forbidden or required (causal-learn's
    ``orient_by_background_knowledge``); the edges oriented, as ``(tail, head)``."""
    from fedcausal_flwr.graphs.graph import ARROW, TAIL

    undirected = np.triu((marks == TAIL) & (marks.T == TAIL), k=1)
    oriented = []
    for a, b in zip(*np.nonzero(undirected), strict=True):
        a, b = int(a), int(b)
        if knowledge.forbidden[b, a] or knowledge.required[a, b]:
            tail, head = a, b
        elif knowledge.forbidden[a, b] or knowledge.required[b, a]:
            tail, head = b, a
        else:
            continue
        marks[tail, head], marks[head, tail] = ARROW, TAIL
        oriented.append((tail, head))
    return oriented


def mark_pag_by_knowledge(
    marks: np.ndarray, knowledge: KnowledgeMatrix
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Impose knowledge on a PAG's edges (FCI, before its rules, which never overwrite a mark
    that is not a circle): a required ``a -> b`` becomes ``a --> b``; a forbidden ``a -> b`` puts
    an arrowhead at ``a`` (a MAG's edge between them is then ``b --> a`` or ``a <-> b``, since
    ``a -> b`` is ruled out). Returns the edges ``oriented`` as ``(tail, head)`` and the
    ``arrowheads`` set as ``(other end, head)``."""
    from fedcausal_flwr.graphs.graph import ARROW, NONE, TAIL

    adjacent = marks != NONE
    oriented, arrowheads = [], []
    for a, b in zip(*np.nonzero(adjacent & knowledge.required), strict=True):
        marks[a, b], marks[b, a] = ARROW, TAIL
        oriented.append((int(a), int(b)))
    for a, b in zip(*np.nonzero(adjacent & knowledge.forbidden & ~knowledge.kept), strict=True):
        if marks[b, a] != ARROW:
            marks[b, a] = ARROW
            arrowheads.append((int(b), int(a)))
    return oriented, arrowheads
