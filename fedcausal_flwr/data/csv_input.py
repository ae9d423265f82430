"""Reading one client's CSV file: every entry point that reads files reads them here.

``pandas.read_csv`` accepts almost anything and turns mistakes into data: a semicolon file becomes
one column, a saved row index becomes a variable, a repeated name comes back renamed ``C.1``, a
file without a header loses its first row to the names. :func:`read_client_csv` refuses each of
these with an :class:`~fedcausal_flwr.data.inputs.InputError` naming the client and the file:

* the path is an existing regular file, not empty, and text: UTF-8, or UTF-16/UTF-32 with a
  byte-order mark (or UTF-16 without one, told by its zero bytes), read as such; a gzip, bz2, xz
  or zip (one member) compressed file is read decompressed, as ``pandas.read_csv`` would read
  it. Other binary files are named when known (zstd, an Excel workbook, Parquet) and refused,
  as is text in another encoding (bytes that do not decode as UTF-8);
* Excel's first line ``sep=;`` names the delimiter (the line is not the header);
* the delimiter is the one given, or sniffed: among ``,`` ``;`` tab ``|`` and whitespace (in
  this order of preference), the first that splits the header and the first
  :data:`SNIFFED_LINES` data lines into the same number (at least two) of fields;
* the header is a row of names: not numbers only and not a row whose every field is a value of
  its column (a file without a header), none empty, none repeated (read here from the header
  itself, since pandas renames repeats);
* no index-like first column: one named ``''``, ``Unnamed: 0`` or ``index`` whose values are
  ``0..n-1`` or ``1..n`` is a saved row index, unless ``keep_index`` keeps it as a variable
  (named ``index`` if its header field is empty);
* at least one data row and no missing value (the line of the first one is named). A value is
  missing when its field is empty or one of :data:`MISSING_MARKERS` (``NA``, ``NaN``, ``NULL``
  ...); unlike pandas' default, ``None`` is not one: benchmark networks name levels ``None``
  (child's ``DuctFlow``, insurance's ``ThisCarDam``), and such a level is data;
* every field is read without its surrounding blanks (pandas strips leading blanks only, so
  ``yes `` would be a level of its own and ``NA `` no missing value): a file with such fields is
  read again with each field stripped, so its types are those of the same file without them;
* no column of numbers written with a decimal comma (``1,5;2,25``), which would read as text.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import lzma
import re
import zipfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import numpy as np
import pandas as pd

from fedcausal_flwr.data.columns import Column, columns_of, stripped_text
from fedcausal_flwr.data.inputs import (
    Fix,
    InputError,
    decimal_comma_columns,
    decimal_comma_fix,
    shown_values,
)
from fedcausal_flwr.options import OptionError, spell

WHITESPACE = "whitespace"
#: Candidate delimiters in order of preference (a tie goes to the earlier one).
DELIMITERS = (",", ";", "\t", "|", WHITESPACE)
#: Data lines the sniffer splits besides the header.
SNIFFED_LINES = 20
INDEX_NAMES = ("", "unnamed: 0", "index")
#: Field texts read as missing besides the empty field: pandas' defaults without ``None``.
MISSING_MARKERS = (
    "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "n/a", "nan", "null",
)  # fmt: skip
_SEP_WORDS = {
    "tab": "\t",
    "\\t": "\t",
    "space": WHITESPACE,
    "spaces": WHITESPACE,
    WHITESPACE: WHITESPACE,
    "comma": ",",
    "semicolon": ";",
    "pipe": "|",
}


def delimiter_name(sep: str) -> str:
    """A delimiter as a message shows it: ``','``, ``tab``, ``whitespace``."""
    return {"\t": "tab", WHITESPACE: "whitespace"}.get(sep, repr(sep))


def parse_sep(value: str | None) -> str | None:
    """A delimiter as typed (``;``, ``\\t``, ``tab``, ``whitespace``) or ``None`` (sniff)."""
    if value is None:
        return None
    text = str(value)
    if text == "\t":
        return text
    word = _SEP_WORDS.get(text.strip().lower()) if text.strip() else WHITESPACE
    if word is not None:
        return word
    if len(text) != 1 or text in "\"'\n\r":
        raise ValueError(f"separator {value!r}: give one character (e.g. ';'), tab or whitespace")
    return text


def split_line(line: str, sep: str) -> list[str]:
    """The fields of one line (quotes respected; names and values stripped of blanks)."""
    if sep == WHITESPACE:
        return line.split()
    return [field.strip() for field in next(csv.reader([line], delimiter=sep))]


def sniff_delimiter(lines: Sequence[str]) -> str | None:
    """The first delimiter of :data:`DELIMITERS` that splits every line of ``lines`` (a header
    and data lines) into the same number, at least two, of fields; ``None`` if none does."""
    for sep in DELIMITERS:
        counts = {len(split_line(line, sep)) for line in lines}
        if len(counts) == 1 and counts.pop() >= 2:
            return sep
    return None


#: Compressions pandas reads (by extension or ``compression=``), by their first bytes.
COMPRESSIONS = (
    (b"\x1f\x8b", "gzip", gzip.decompress),
    (b"BZh", "bz2", bz2.decompress),
    (b"\xfd7zXZ\x00", "xz", lzma.decompress),
)
#: Binary formats named in the refusal, by their first bytes: what the file is, what to do.
BINARY_FORMATS = (
    (b"\x28\xb5\x2f\xfd", "is zstd-compressed", "decompress it first (zstd -d FILE)"),
    (b"\xd0\xcf\x11\xe0", "is an Excel workbook (.xls), not a CSV file", "save it as CSV"),
    (b"PAR1", "is a Parquet file, not a CSV file", "write it as CSV (pandas: to_csv)"),
)
#: Byte-order marks, longest first (UTF-32's begins like UTF-16's).
BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32", "UTF-32"),
    (b"\x00\x00\xfe\xff", "utf-32", "UTF-32"),
    (b"\xef\xbb\xbf", "utf-8-sig", "UTF-8"),
    (b"\xff\xfe", "utf-16", "UTF-16"),
    (b"\xfe\xff", "utf-16", "UTF-16"),
)
#: Excel's first line naming the delimiter (``sep=;``), which it writes and reads.
_EXCEL_SEP = re.compile(r"sep=([^\"'\r\n])", re.IGNORECASE)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class _File:
    """One client's file while it is read: raises errors that name the client and the file."""

    def __init__(self, path: Path, client: int | None, entry_point: str):
        self.path, self.client, self.entry_point = path, client, entry_point

    def error(self, problem: str, fix: Fix | str | None = None, column: str | None = None):
        return InputError(
            problem,
            client=self.client,
            file=self.path.name,
            column=column,
            fix=fix,
            entry_point=self.entry_point,
        )

    def text(self) -> str:
        """The file's text, once it is known to be a non-empty text file (decompressed and
        decoded as the module docstring says)."""
        path = self.path
        if path.is_dir():
            return self._raise("is a directory, not a CSV file")
        if not path.exists():
            return self._raise(f"does not exist (no file {str(path)!r})")
        if not path.is_file():
            return self._raise("is not a regular file")
        raw = self._decompressed(path.read_bytes())
        if not raw.strip():
            return self._raise("is an empty file", "write a header row and the data")
        return self._decoded(raw)

    def _decompressed(self, raw: bytes) -> bytes:
        """The file's bytes, decompressed if they are gzip, bz2, xz or zip (one member)."""
        for magic, what, fix in BINARY_FORMATS:
            if raw.startswith(magic):
                self._raise(what, fix)
        for magic, name, decompress in COMPRESSIONS:
            if raw.startswith(magic):
                try:
                    return decompress(raw)
                except (OSError, EOFError, ValueError, lzma.LZMAError) as err:
                    self._raise(f"is {name}-compressed but does not decompress ({err})")
        if raw.startswith(b"PK\x03\x04"):
            return self._unzipped(raw)
        return raw

    def _unzipped(self, raw: bytes) -> bytes:
        try:
            with zipfile.ZipFile(io.BytesIO(raw)) as archive:
                names = [n for n in archive.namelist() if not n.endswith("/")]
                if any(n.startswith(("xl/", "word/", "ppt/")) for n in names):
                    self._raise("is an Excel workbook (.xlsx), not a CSV file", "save it as CSV")
                if "mimetype" in names and "content.xml" in names:
                    self._raise("is a spreadsheet (.ods), not a CSV file", "save it as CSV")
                if len(names) != 1:
                    self._raise(
                        f"is a zip archive of {len(names)} files; a client reads one CSV file",
                        "give the CSV file itself, or a zip archive holding it alone",
                    )
                return archive.read(names[0])
        except (zipfile.BadZipFile, OSError, EOFError) as err:
            self._raise(f"is zip-compressed but does not decompress ({err})")

    def _decoded(self, raw: bytes) -> str:
        """The text of ``raw``: by its byte-order mark, as UTF-16 if its zero bytes say so,
        else UTF-8; named and refused when it is neither."""
        head = raw[:4096]
        encoding, name = next(((e, n) for bom, e, n in BOMS if head.startswith(bom)), (None, ""))
        if encoding is None:
            encoding, name = _utf16_without_bom(head)
        if encoding is not None:
            try:
                text = raw.decode(encoding)
            except UnicodeDecodeError as err:
                self._raise(
                    f"is not a text CSV file: it starts like {name} text but byte {err.start} "
                    "does not decode",
                    "save it as UTF-8 text",
                )
        else:
            nul = raw.find(b"\x00")
            if nul >= 0:
                self._raise(
                    f"is not a text CSV file (a NUL byte at byte {nul}: a binary file? It is "
                    "not gzip, bz2, xz or zip compressed, nor UTF-16 or UTF-32 text)",
                    "give a CSV file (text, one row per line)",
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                self._raise(
                    f"is not a text CSV file (byte {raw[err.start]:#04x} at byte {err.start} is "
                    "not UTF-8)",
                    "save it as UTF-8 text" + _other_encoding(raw),
                )
        nul = text.find("\x00")
        if nul >= 0:
            self._raise(
                f"is not a text CSV file: read as {name} text, character {nul} is NUL (a "
                "binary file?)",
                "give a CSV file (text, one row per line)",
            )
        return text

    def _raise(self, problem: str, fix: Fix | str | None = None) -> NoReturn:
        raise self.error(problem, fix)


def _other_encoding(raw: bytes) -> str:
    """What text that is not UTF-8 may be, for the fix (a guess: any bytes are Latin-1)."""
    try:
        raw.decode("cp1252")
    except UnicodeDecodeError:
        return ""
    return " (it may be Windows-1252 or Latin-1 text: pandas reads it with encoding='cp1252')"


def _utf16_without_bom(head: bytes) -> tuple[str | None, str]:
    """``utf-16-le`` or ``utf-16-be`` when ``head`` has a zero byte in most even (big-endian)
    or odd (little-endian) places and almost none in the others, as ASCII text in UTF-16 has;
    else ``(None, "")``."""
    pairs = len(head) // 2
    if pairs < 2:
        return None, ""
    data = np.frombuffer(head[: 2 * pairs], dtype=np.uint8).reshape(pairs, 2)
    zero = (data == 0).mean(axis=0)
    if zero[1] > 0.6 and zero[0] < 0.05:
        return "utf-16-le", "UTF-16 (little-endian, no byte-order mark)"
    if zero[0] > 0.6 and zero[1] < 0.05:
        return "utf-16-be", "UTF-16 (big-endian, no byte-order mark)"
    return None, ""


def read_client_csv(
    path: str | Path,
    client: int | None,
    *,
    sep: str | None = None,
    keep_index: bool = False,
    dtype: Mapping[str, Any] | None = None,
    entry_point: str = "python",
    allow_missing: bool = False,
) -> pd.DataFrame:
    """Client ``client``'s CSV file as a frame, checked as the module docstring says
    (``client=None``: a file read for no single client, such as a pooled file).

    ``sep``: the delimiter (sniffed if ``None``); ``keep_index``: keep an index-like first
    column as a variable; ``dtype``: pandas dtypes of named columns; ``entry_point``: where the user
    typed the settings, for the spelling of the fixes; ``allow_missing``: missing values are
    read as NaN (for a method whose ``missing`` option deletes them), not refused.
    """
    source = _File(Path(path), client, entry_point)
    text = source.text()
    text, declared = _excel_sep_line(source, text, parse_sep(sep))
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].lstrip().startswith("#"):  # a data value may start with '#'
        raise source.error(
            "starts with a comment line ('#'), not its header row; a client file holds its "
            "header row, then data rows only",
            "remove the comment lines",
        )
    sep = _delimiter(source, lines, declared or parse_sep(sep), declared is not None)
    header = split_line(lines[0], sep)
    _check_header(source, header)
    if len(lines) == 1:
        raise source.error("has a header but no data rows")
    frame = _parse(source, text, sep, header, dtype)
    columns = columns_of(frame)  # not kept with the frame: the caller may change it
    if _padded(frame, columns):
        frame = _without_blanks(source, text, sep, header, dtype)
        columns = columns_of(frame)
    _check_decimal_commas(source, columns, sep)
    _check_header_is_not_data(source, frame, header)
    if header[0].lower() in INDEX_NAMES:
        _check_index(source, frame, header[0], keep_index)
    if not allow_missing:
        _check_missing(source, frame, first_line=2 + (declared is not None))
    return frame


def _excel_sep_line(source: _File, text: str, given: str | None) -> tuple[str, str | None]:
    """The text without Excel's first line ``sep=X`` and the delimiter it names (``None``: no
    such line). A delimiter given otherwise must agree with it."""
    first, _, rest = text.partition("\n")
    line = first.rstrip("\r").strip('"')
    match = _EXCEL_SEP.fullmatch(line) or _EXCEL_SEP.fullmatch(line.strip())  # sep=  : a blank
    if match is None:
        return text, None
    declared = parse_sep(match.group(1))
    assert declared is not None
    if given is not None and given != declared:
        raise source.error(
            f"names its separator {delimiter_name(declared)} in its first line "
            f"{first.strip()!r} (as Excel writes it), but the separator "
            f"{delimiter_name(given)} was given",
            Fix("give {} or leave the separator out", (("sep", declared),)),
        )
    return rest, declared


def _delimiter(source: _File, lines: list[str], given: str | None, declared: bool = False) -> str:
    """The delimiter: ``given`` (by the user, or by the file's ``sep=`` line: ``declared``)
    when it splits the header, else the one sniffed."""
    sample = lines[: SNIFFED_LINES + 1]
    sniffed = sniff_delimiter(sample)
    if given is not None:
        if declared and len(split_line(lines[0], given)) < 2:
            named = (
                f"has a single column with the separator {delimiter_name(given)} its first "
                "line names"
            )
            if sniffed:
                raise source.error(
                    f"{named}, but its lines split on {delimiter_name(sniffed)}",
                    f"correct its first line to sep={sniffed} or remove that line",
                )
            raise source.error(
                f"{named}; a client file needs at least two columns",
                "give the file's other columns",
            )
        if len(split_line(lines[0], given)) < 2:
            hint = f" (its lines split on {delimiter_name(sniffed)})" if sniffed else ""
            raise source.error(
                f"has a single column with the separator {delimiter_name(given)}{hint}",
                Fix("give the file's separator with {}", (("sep", sniffed or ";"),)),
            )
        return given
    if sniffed is not None:
        return sniffed
    widest = max(DELIMITERS, key=lambda s: len(split_line(lines[0], s)))
    width = len(split_line(lines[0], widest))
    if width < 2:
        raise source.error(
            "has a single column: none of ',', ';', tab, '|' or whitespace splits its header "
            f"{lines[0][:60]!r}; a client file needs at least two columns",
            Fix("give the separator with {} if it is another one", (("sep", "CHAR"),)),
        )
    bad = next((k, line) for k, line in enumerate(sample) if len(split_line(line, widest)) != width)
    raise source.error(
        f"has rows of different lengths: with the separator {delimiter_name(widest)} the header "
        f"has {width} fields but non-blank line {bad[0] + 1} has "
        f"{len(split_line(bad[1], widest))}",
        Fix("fix those rows, or give the separator with {}", (("sep", widest),)),
    )


def _check_header(source: _File, header: list[str]) -> None:
    if all(_is_number(name) for name in header):
        raise source.error(
            f"seems to lack a header row: its first line ({shown_values(header)}) holds numbers "
            "only",
            "add a first line with the column names",
        )
    empty = [k + 1 for k, name in enumerate(header) if not name and k > 0]  # 1st: maybe an index
    if empty:
        raise source.error(
            f"has columns without a name (column {', '.join(map(str, empty))} of the header)",
            "name every column in the header",
        )
    repeated = sorted(name for name, k in Counter(header).items() if k > 1)
    if repeated:
        raise source.error(
            f"has repeated column names {repeated} in its header",
            "give every column its own name",
        )


def _check_header_is_not_data(source: _File, frame: pd.DataFrame, header: list[str]) -> None:
    """A file without a header gives its first data row as names: refuse a first line each of
    whose fields is a value of its column (a number over numbers, or a value found below)."""
    if not all(header):
        return
    for position, name in enumerate(header):
        values = frame.iloc[:, position]
        if _is_number(name) and pd.api.types.is_numeric_dtype(values.dtype):
            continue
        if name not in set(values.astype(str).str.strip()):
            return
    raise source.error(
        f"seems to lack a header row: its first line ({shown_values(header)}) looks like a data "
        "row (each field is a value of its column)",
        "add a first line with the column names",
    )


def _parse(
    source: _File, text: str, sep: str, header: list[str], dtype: Mapping[str, Any] | None
) -> pd.DataFrame:
    delimiter = r"\s+" if sep == WHITESPACE else sep
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            sep=delimiter,
            header=0,
            index_col=False,
            skipinitialspace=sep != WHITESPACE,
            keep_default_na=False,
            na_values=["", *MISSING_MARKERS],
            dtype=None if dtype is None else {k: v for k, v in dtype.items() if k in header},
        )
    except (pd.errors.ParserError, ValueError) as err:
        raise source.error(
            f"cannot be read as CSV with the separator {delimiter_name(sep)}: {str(err).strip()}"
        ) from None
    if frame.shape[1] != len(header):
        raise source.error(
            f"has {frame.shape[1]} columns in its data but {len(header)} names in its header"
        )
    frame.columns = pd.Index(header)
    if frame.empty:
        raise source.error("has a header but no data rows")
    return frame


def _padded(frame: pd.DataFrame, columns: Sequence[Column]) -> bool:
    """Whether a text field kept surrounding blanks (pandas strips leading ones only, outside
    quotes): a column read otherwise than pandas read it, but for unused categories only."""
    return any(  # (a category column's categories come from the file, unused ones from dtype)
        not c.categorical or stripped_text(frame.iloc[:, k].cat.categories) is not None
        for k, c in enumerate(columns)
        if c.read is not None
    )


def _without_blanks(
    source: _File, text: str, sep: str, header: list[str], dtype: Mapping[str, Any] | None
) -> pd.DataFrame:
    """The file read again with every field stripped of surrounding blanks: its types and
    missing values are then those of the file written without them (``NA `` is missing, ``1 ``
    a number)."""
    delimiter = r"\s+" if sep == WHITESPACE else sep
    fields = pd.read_csv(
        io.StringIO(text),
        sep=delimiter,
        header=0,
        index_col=False,
        dtype=str,
        keep_default_na=False,
        na_filter=False,
        skipinitialspace=sep != WHITESPACE,
    )
    fields.columns = pd.Index(range(fields.shape[1]))
    stripped = pd.DataFrame({k: fields[k].str.strip() for k in fields.columns})
    stripped.columns = pd.Index(header)
    return _parse(source, stripped.to_csv(index=False, lineterminator="\n"), ",", header, dtype)


def _check_decimal_commas(source: _File, columns: Sequence[Column], sep: str) -> None:
    """Numbers written with a decimal comma (``1,5`` in a ``;`` file) read as text: refused,
    naming the column and how to read them."""
    found = decimal_comma_columns(columns)
    if not found:
        return
    name, examples = found[0]
    more = f" ({len(found)} such columns)" if len(found) > 1 else ""
    raise source.error(
        f"holds numbers written with a decimal comma ({shown_values(examples)}){more}, which "
        f"this reader reads as text (the separator is {delimiter_name(sep)})",
        decimal_comma_fix(sep),
        column=name,
    )


def _check_index(source: _File, frame: pd.DataFrame, name: str, keep_index: bool) -> None:
    """A first column named like an index whose values count the rows is a saved row index;
    ``keep_index`` keeps it as a variable (named ``index`` if its header field is empty)."""
    values = frame.iloc[:, 0]
    n = len(values)
    counts = pd.api.types.is_integer_dtype(values.dtype) and bool(
        np.array_equal(values, np.arange(n)) or np.array_equal(values, np.arange(1, n + 1))
    )
    if not counts:
        if not name:
            raise source.error(
                "has a first column without a name", "name every column in the header"
            )
        return
    if keep_index:
        if not name:
            frame.rename(columns={"": "index"}, inplace=True)
        return
    fix = Fix(
        "write the file without the row index (pandas: to_csv(..., index=False)), or keep it "
        "as a variable" + ("" if name else " named 'index'") + " with {}",
        (("keep_index", True),),
    )
    shown = f"values {int(values.iloc[0])}..{int(values.iloc[-1])}, one per row"
    if name:
        raise source.error(f"looks like a saved row index ({shown})", fix, column=name)
    raise source.error(
        f"has a first column without a name that looks like a saved row index ({shown})", fix
    )


def _check_missing(source: _File, frame: pd.DataFrame, first_line: int = 2) -> None:
    """No missing value; ``first_line``: the file's line of data row 0 (a header line before
    it, and Excel's ``sep=`` line if any)."""
    missing = frame.isna().to_numpy()
    if not missing.any():
        return
    empty = missing.all(axis=0)
    if empty.any():
        raise source.error(
            f"has no value (all {len(frame)} data rows are empty)",
            "drop the column",
            column=str(frame.columns[int(np.argmax(empty))]),
        )
    rows, cols = np.nonzero(missing)
    row, col = int(rows[0]), int(cols[0])
    raise source.error(
        f"has a missing value in data row {row} (line {row + first_line} of the file; "
        f"{int(missing.sum())} missing in the file)",
        "complete or drop the rows with missing values",
        column=str(frame.columns[col]),
    )


def read_client_files(
    paths: Sequence[str | Path],
    *,
    sep: str | None = None,
    keep_index: bool = False,
    dtype: Mapping[str, Any] | None = None,
    entry_point: str = "python",
    allow_missing: bool = False,
) -> list[pd.DataFrame]:
    """One frame per file, client ``k`` reading ``paths[k]`` (see :func:`read_client_csv`)."""
    if not paths:
        raise ValueError("no CSV files given")
    return [
        read_client_csv(
            path,
            k,
            sep=sep,
            keep_index=keep_index,
            dtype=dtype,
            entry_point=entry_point,
            allow_missing=allow_missing,
        )
        for k, path in enumerate(paths)
    ]


def site_file_names(clients: int) -> list[str]:
    """``site0.csv`` ... one per client, zero-padded from 11 clients on, so that a shell's sorted
    ``site*.csv`` lists them in client order (``site10`` would come before ``site2``)."""
    width = len(str(max(clients - 1, 0)))
    return [f"site{k:0{width}d}.csv" for k in range(clients)]


def write_site_files(
    frames: Sequence[pd.DataFrame],
    edges: Sequence[tuple[str, str]],
    folder: str | Path,
    *,
    force: bool = False,
    entry_point: str = "python",
    source: str = "the data",
) -> tuple[list[Path], Path, list[Path]]:
    """Client ``k``'s frame as ``folder/site<k>.csv`` and ``edges`` as ``folder/truth.csv``
    (``cause,effect``), checked to read back as the same rows with :func:`read_client_csv`;
    returns the site files, the truth file and the files removed.

    Existing files are refused unless ``force``, which also removes ``site<N>.csv`` files of an
    earlier, larger sample (a ``site*.csv`` glob would read them). Nothing is replaced until every
    file has been written and read back. ``source`` names the data in errors (``network 'x'``)."""
    out = Path(folder)
    flag, force_flag = spell("out", entry_point), spell("force", entry_point)
    if out.exists() and not out.is_dir():
        raise OptionError(f"{flag} {folder}: is a file, not a folder")
    names = site_file_names(len(frames))
    stale = sorted(
        p for p in out.glob("site*.csv") if _is_site_file(p.name) and p.name not in names
    )
    existing = [out / n for n in [*names, "truth.csv"] if (out / n).exists()]
    if (existing or stale) and not force:
        clash = (existing or stale)[0]
        why = "" if existing else " (left from an earlier sample: a site*.csv glob would read it)"
        raise OptionError(
            f"{flag} {folder}: {clash} exists{why}; give {force_flag} to replace the files of "
            "an earlier sample, or another folder"
        )
    for frame in frames:
        _check_writable(frame, source)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for k, (name, frame) in enumerate(zip(names, frames, strict=True)):
            temp = out / f".{name}.tmp"
            written.append(temp)
            frame.to_csv(temp, index=False, lineterminator="\n", encoding="utf-8")
            try:
                back = read_client_csv(temp, k, entry_point=entry_point)
            except InputError as err:
                column = "" if err.column is None else f" column {err.column!r}"
                raise OptionError(
                    f"{source}: {name}{column} would not read back as written: it {err.problem}"
                ) from None
            _check_same_rows(f"{source}: {name}", frame, back)
        truth = out / ".truth.csv.tmp"
        written.append(truth)
        pd.DataFrame(list(edges), columns=["cause", "effect"]).to_csv(
            truth, index=False, lineterminator="\n", encoding="utf-8"
        )
        for temp in written:
            temp.replace(out / temp.name[1:-4])
    finally:
        for temp in written:
            temp.unlink(missing_ok=True)
    for path in stale:
        path.unlink()
    return [out / n for n in names], out / "truth.csv", stale


def _is_site_file(name: str) -> bool:
    return name.startswith("site") and name.endswith(".csv") and name[4:-4].isdigit()


def _check_writable(frame: pd.DataFrame, source: str) -> None:
    """Refuse a variable name or level the reader would not give back (a level named ``NA``)."""
    if all(_is_number(str(name)) for name in frame.columns):
        raise OptionError(
            f"{source}: the variables are named by numbers only "
            f"({shown_values(list(frame.columns))}): a CSV file with this header reads as a file "
            "without one"
        )
    for name in frame.columns:
        values = frame[name]
        if pd.api.types.is_numeric_dtype(values.dtype) or pd.api.types.is_bool_dtype(values.dtype):
            continue
        levels = values.cat.categories if isinstance(values.dtype, pd.CategoricalDtype) else values
        for level in pd.unique(np.asarray(levels, dtype=object)):
            text = str(level)
            if text.strip() in ("", *MISSING_MARKERS) or text != text.strip():
                raise OptionError(
                    f"{source}: variable {name!r} has the level {text!r}, which a CSV file "
                    "cannot hold as a value (it reads back as missing or changed)"
                )


def _check_same_rows(name: str, frame: pd.DataFrame, back: pd.DataFrame) -> None:
    """``back`` holds ``frame``'s rows: the same names, numbers equal, each level read back as
    one value of its own (``TRUE`` may come back as ``True``; two levels never merge)."""
    if [str(c) for c in frame.columns] != list(back.columns) or len(frame) != len(back):
        raise OptionError(f"{name} would not read back as written: its header or rows changed")
    for column in frame.columns:
        values, read = frame[column], back[str(column)]
        if pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(
            values.dtype
        ):
            same = np.array_equal(values.to_numpy(), read.to_numpy())
        else:
            pairs = pd.DataFrame(
                {"w": values.astype(str).to_numpy(), "r": read.astype(str).to_numpy()}
            ).drop_duplicates()
            same = bool(pairs["w"].is_unique and pairs["r"].is_unique)
        if not same:
            raise OptionError(
                f"{name} would not read back as written: column {str(column)!r} reads back "
                "with other values"
            )
