"""Every path a user hands nsysdoc goes through here: captures, rule files, config files, outputs.

Guarantees, each enforced here and nowhere else:

* an input is a regular file (after following links): FIFOs, devices and sockets are refused at
  once, before anything opens them (opening a FIFO blocks forever);
* a folder that cannot be listed, or a file that cannot be read, is a one-line error;
* the same file given twice (by two names, links or a folder and a file in it) is used once —
  except for a job's ranks (``same_file="refuse"``), where two names of one file (a hard link, a
  symbolic link) are an error naming both: 400 links to one capture are not a 400-rank job;
* nothing is ever written to a path that is, or links to, an input (:func:`check_outputs`, which
  is :func:`nsysdoc.outputs.check_outputs`, the one output guard).
"""
from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from .errors import InputError

# what a path holds (suffixes, which names a folder stands for): nsysdoc.formats
from .formats import NSYS_INPUT_SUFFIXES, KINETO_SUFFIXES, REP_SUFFIX, SQLITE_SUFFIX, is_kineto_name  # noqa: F401
#: TensorBoard's layout: ``<logdir>/plugins/profile/<run>/<worker>.pt.trace.json[.gz]``
TENSORBOARD_RUNS = ("plugins", "profile")

#: the largest rule or config file read (rule files are a few kB; a cap keeps hostile ones cheap)
MAX_TEXT_BYTES = 1 << 20


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def regular_file(path: str | os.PathLike, what: str = "input") -> Path:
    """``path`` if it is a readable regular file (links followed), else a one-line InputError.
    Never opens a non-regular file."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{p}: no such file or directory" + ("" if what == "input" else f" ({what})")) from None
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{p}: is {_kind(st.st_mode)}, not {'an' if what[0] in 'aeiou' else 'a'} {what} file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{p}: cannot read the {what}: permission denied")
    return p


def read_text(path: str | os.PathLike, what: str, max_bytes: int = MAX_TEXT_BYTES) -> str:
    """The UTF-8 text of a small regular file (rule, config), with one-line errors for a
    non-regular file, a file over ``max_bytes``, or bytes that are not UTF-8. Errors never quote
    the file's content."""
    p = regular_file(path, what)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"{p}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise InputError(f"{p}: {what} file is larger than {max_bytes // 1024} kB; refusing to read it")
    if b"\x00" in data:
        raise InputError(f"{p}: {what} file is binary (holds NUL bytes), not YAML text")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"{p}:{line}: {what} file is not UTF-8 text (byte {exc.start})") from None
    return text.removeprefix("\ufeff")


def _identity(p: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _list_dir(p: Path) -> list[Path]:
    try:
        return sorted(p.iterdir())
    except OSError as exc:
        raise InputError(f"{p}: cannot list this folder: {exc.strerror or exc}") from None


def not_regular(path: str | os.PathLike) -> str | None:
    """Why ``path`` is not a capture file ("a directory", "a named pipe (FIFO)", "a broken link",
    ...), or None for a regular file. Never opens it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "a broken link" if os.path.islink(path) else "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if stat.S_ISREG(st.st_mode) else _kind(st.st_mode)


def _same_file_error(first: str, second: str) -> InputError:
    how = "a symbolic link" if os.path.islink(first) or os.path.islink(second) else "hard links"
    return InputError(f"{first} and {second} are one file ({how}): each rank's capture must be a different "
                      "file", hint="give each rank's capture once")


def expand_inputs(paths: Sequence[str | os.PathLike], seen: set | None = None, *, same_file: str = "skip",
                  keep_not_regular: bool = False) -> list[str]:
    """Expand CLI inputs: files are kept (in order); a folder stands for all ``*.nsys-rep`` and
    ``*.sqlite`` in it (sorted), keeping one of ``x.nsys-rep``/``x.sqlite``: the sqlite when it is
    newer, else the report; and for its PyTorch Profiler traces (``*.pt.trace.json[.gz]``, also
    in TensorBoard's ``plugins/profile/<run>/`` folders). A file met twice (same device and inode)
    is kept once; pass the same ``seen`` set to several calls to dedupe across them. Missing,
    unreadable and non-regular inputs raise InputError.

    For a job's ranks: ``same_file="refuse"`` raises InputError naming both paths when one file
    is met under two different names (a hard link, a symbolic link; the same path met twice, as a
    file and in its folder, is still kept once); ``keep_not_regular`` keeps a folder's entries
    that carry a capture's name but are not regular files (a directory named ``rank1.sqlite``, a
    FIFO, a broken link) instead of skipping them silently, for the caller to name
    (:func:`not_regular`) — unless a regular file of the same name stands for that capture."""
    out: list[str] = []
    seen = set() if seen is None else seen
    names: dict = {}  # identity -> the first path it was met under (for same_file="refuse")

    def add(p: Path) -> None:
        p = regular_file(p, "input")
        key = _identity(p)
        if key is not None and key in seen:
            first = names.get(key)
            if same_file == "refuse" and first is not None and os.path.abspath(first) != os.path.abspath(p):
                raise _same_file_error(first, str(p))
            return
        if key is not None:
            seen.add(key)
            names[key] = str(p)
        out.append(str(p))

    for raw in paths:
        p = Path(raw)
        try:
            is_dir = p.is_dir()
        except OSError as exc:
            raise InputError(f"{p}: cannot read: {exc.strerror or exc}") from None
        if not is_dir:
            add(p)
            continue
        by_stem: dict[str, dict[str, Path]] = {}
        odd: dict[str, Path] = {}  # capture names that are not regular files (keep_not_regular)
        children = _list_dir(p)
        tb = p.joinpath(*TENSORBOARD_RUNS)
        if tb.is_dir():
            children += [c for run in _list_dir(tb) if run.is_dir() for c in _list_dir(run) if is_kineto_name(c.name)]
        for child in children:
            kineto = is_kineto_name(child.name)
            if child.name.startswith(".") or (child.suffix not in NSYS_INPUT_SUFFIXES and not kineto):
                continue
            if not_regular(child) is not None:
                if keep_not_regular:
                    odd.setdefault(str(child.relative_to(p)) if kineto else child.stem, child)
                continue
            if kineto:  # no .sqlite/.nsys-rep pairing: a trace stands alone
                by_stem.setdefault(str(child.relative_to(p)), {})[".pt.trace"] = child
            else:
                by_stem.setdefault(child.stem, {})[child.suffix] = child
        for stem, child in odd.items():  # named, not skipped: the caller reports it (a missing rank)
            if stem not in by_stem:
                by_stem[stem] = {"odd": child}
        if not by_stem:
            raise InputError(f"{p}: no .nsys-rep or .sqlite files in this folder (nor PyTorch Profiler traces, "
                             "*.pt.trace.json[.gz])")
        for stem in sorted(by_stem):
            pair = by_stem[stem]
            rep, db = pair.get(REP_SUFFIX), pair.get(SQLITE_SUFFIX)
            if "odd" in pair:
                out.append(str(pair["odd"]))
            elif ".pt.trace" in pair:
                add(pair[".pt.trace"])
            elif rep and db:
                add(db if db.stat().st_mtime_ns > rep.stat().st_mtime_ns else rep)
            else:
                add(rep or db)  # type: ignore[arg-type]
    return out


def _resolved(p: Path) -> Path:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return p.absolute()


def check_outputs(outputs: Iterable[str | os.PathLike], inputs: Iterable[str | os.PathLike]) -> None:
    """Refuse (before any work) to write an output over an input or what the run reads with it
    (its -wal/-shm/-journal, an export beside a .nsys-rep): :func:`nsysdoc.outputs.check_outputs`,
    the one output guard, over :func:`nsysdoc.outputs.run_reads` of ``inputs``."""
    from .outputs import check_outputs as guard, run_reads

    guard(list(outputs), run_reads([Path(i) for i in inputs]))

