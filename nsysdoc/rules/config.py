"""The project configuration (``nsysdoc.yaml``, ``.nsysdoc.yaml`` or ``[tool.nsysdoc]`` in
``pyproject.toml``): finding one that can be trusted, reading it, checking it.

Why a module of its own: a configuration found by walking up from the current folder may belong
to someone else, so discovery is a trust decision (ownership and modes, checked with ``stat``
only, never opening what is not trusted), apart from loading the rules
(:mod:`nsysdoc.rules.ruleset`) and from evaluating them (:mod:`nsysdoc.rules.evaluate`). Moved out
of ``nsysdoc/rules/evaluate.py`` (issue 51); re-exported there.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import RuleError
from .spec import SEVERITIES, _key, _short, load_yaml, validate


CONFIG_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "rule_dirs": {"type": "array", "items": {"type": "string"}},
        "fail_on": {"enum": list(SEVERITIES)},
        "step_marker": {"type": "string"},
        "rules": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {"enabled": {"type": "boolean"}, "severity": {"enum": list(SEVERITIES)},
                           "params": {"type": "object"}}}},
    },
}


@dataclass
class Config:
    path: Path | None = None
    rule_dirs: list[Path] = field(default_factory=list)
    rules: dict[str, dict] = field(default_factory=dict)
    fail_on: str | None = None
    step_marker: str | None = None
    #: how ``path`` was chosen: "given" (``--config``), "found" (walking up from the current
    #: folder), "disabled" (``--no-config``), or None (nothing found)
    origin: str | None = None
    #: configuration files found walking up but not read, each ``{"path", "reason"}``
    #: (:func:`discover_config`); the command line prints :attr:`warnings`
    ignored: list[dict] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """One line per configuration file found but not read (for the caller to print)."""
        return [ignored_warning(i) for i in self.ignored]


CONFIG_NAMES = ("nsysdoc.yaml", ".nsysdoc.yaml")


@dataclass
class Discovery:
    """What walking up from a folder found: the configuration to read (or None) and the files
    that were passed over, each ``{"path", "reason"}``."""

    path: Path | None
    ignored: list[dict] = field(default_factory=list)


def ignored_warning(item: dict) -> str:
    return (f"{item['path']}: configuration not read: {item['reason']}; if you trust it, pass it with "
            f"--config")


def discover_config(start: Path | None = None) -> Discovery:
    """The nearest ``nsysdoc.yaml`` (or ``.nsysdoc.yaml``), else ``pyproject.toml`` with
    ``[tool.nsysdoc]``, in ``start`` (default: the current folder) or its parents, that can be
    trusted: a regular file owned by this user or root, writable by nobody else, in a folder
    owned by this user or root that nobody else can write to (a group that is the user's own
    private group does not count as others). Anything else found on the way is passed over,
    never opened (a FIFO cannot block the run) and listed in ``ignored`` with the reason, so the
    caller can say so; the walk then goes on upwards."""
    try:
        here = (start or Path.cwd()).resolve()
    except OSError:  # the current folder was removed: there is nothing above it to find
        return Discovery(None, [])
    ignored: list[dict] = []
    for d in (here, *here.parents):
        for name in (*CONFIG_NAMES, "pyproject.toml"):
            p = d / name
            try:
                os.lstat(p)
            except OSError:  # absent, or the folder cannot be listed
                continue
            reason = _distrust(p)
            if name == "pyproject.toml":
                if reason is None:
                    if _pyproject_is_ours(p):
                        return Discovery(p, ignored)
                elif _regular(p) and _pyproject_is_ours(p):  # another's, but it would have been read
                    ignored.append({"path": str(p), "reason": reason})
                continue
            if reason is None:
                return Discovery(p, ignored)
            ignored.append({"path": str(p), "reason": reason})
    return Discovery(None, ignored)


def find_config(start: Path | None = None) -> Path | None:
    """The configuration :func:`discover_config` picks (None when there is none it can trust)."""
    return discover_config(start).path


def _regular(p: Path) -> bool:
    try:
        return stat.S_ISREG(os.stat(p).st_mode)
    except OSError:
        return False


def _trusted_uid(uid: int) -> bool:
    return uid in (_uid(), 0)


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else 0


def _private_group(gid: int) -> bool:
    """Whether ``gid`` is the user's own group (a "user private group": same name as the user,
    the user's primary group, no other member), so group write access is the user's alone."""
    try:
        import grp
        import pwd

        user = pwd.getpwuid(_uid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError, OSError):
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and not set(group.gr_mem) - {user.pw_name}


def _writable_by_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & stat.S_IWOTH) or bool(st.st_mode & stat.S_IWGRP and not _private_group(st.st_gid))


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _distrust(p: Path) -> str | None:
    """Why a configuration file found by walking up must not be read, or None when it can be.
    Only ``stat``: the file is never opened here."""
    if hasattr(os, "getuid"):  # POSIX ownership and modes (Windows has neither)
        try:
            link = os.lstat(p)
            st = os.stat(p)
        except OSError as exc:
            return f"cannot be read ({exc.strerror or exc})"
        if not stat.S_ISREG(st.st_mode):
            return f"it is {_kind(st.st_mode)}, not a regular file"
        if stat.S_ISLNK(link.st_mode) and not _trusted_uid(link.st_uid):
            return f"it is a symlink owned by another user (uid {link.st_uid})"
        if not _trusted_uid(st.st_uid):
            return f"it is owned by another user (uid {st.st_uid})"
        if _writable_by_others(st):
            return "other users can write to it"
        folders = [p.parent]
        try:
            real = p.resolve().parent
        except (OSError, RuntimeError):
            return "it is a symlink that cannot be followed"
        if real != p.parent:
            folders.append(real)
        for folder in folders:
            try:
                fst = os.stat(folder)
            except OSError as exc:
                return f"its folder {folder} cannot be read ({exc.strerror or exc})"
            if not _trusted_uid(fst.st_uid):
                return f"its folder {folder} is owned by another user (uid {fst.st_uid})"
            if _writable_by_others(fst):
                return f"its folder {folder} can be written by other users"
        return None
    return None if _regular(p) else "it is not a regular file"


def _pyproject_is_ours(pp: Path) -> bool:
    """Whether a ``pyproject.toml`` found by walking up holds a ``[tool.nsysdoc]`` table. Any
    other one is not ours and is ignored, whatever it holds: invalid or non-UTF-8 TOML, ``tool``
    that is not a table, arrays nested past the parser's recursion limit, more than
    ``MAX_TEXT_BYTES``, a FIFO (an explicit ``--config`` gets those refused instead)."""
    from ..inputs import MAX_TEXT_BYTES

    try:
        fd = os.open(pp, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return False
    try:
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):  # replaced by a FIFO since: never read
                return False
            raw = fh.read(MAX_TEXT_BYTES + 1)
        if len(raw) > MAX_TEXT_BYTES or b"nsysdoc" not in raw:
            return False
        import tomllib  # only a pyproject.toml that names nsysdoc is parsed (issue 50: not imported otherwise)

        tool = tomllib.loads(raw.decode("utf-8").removeprefix("\ufeff")).get("tool")
    except (OSError, ValueError, RecursionError, MemoryError):  # TOMLDecodeError, UnicodeDecodeError are ValueErrors
        return False
    return isinstance(tool, dict) and isinstance(tool.get("nsysdoc"), dict)


def load_config(path: Path | None) -> Config:
    if path is None:
        return Config()
    path = Path(path)
    if not path.exists():
        raise RuleError(f"{path}: config file not found")
    if path.suffix == ".toml":
        import tomllib

        from ..errors import InputError
        from ..inputs import read_text

        try:
            doc = tomllib.loads(read_text(path, "config"))
        except InputError as exc:
            raise RuleError(exc.message) from None
        except tomllib.TOMLDecodeError as exc:
            raise RuleError(f"{path}: invalid TOML: {str(exc)[:120]}") from None
        except RecursionError:
            raise RuleError(f"{path}: invalid TOML: nested too deeply") from None
        tool = doc.get("tool", {})
        data = tool.get("nsysdoc", {}) if isinstance(tool, dict) else {}
        if not isinstance(data, dict):
            raise RuleError(f"{path}: tool.nsysdoc: expected a table, got {_short(data)}")
        lines: dict = {}
    else:
        data, lines = load_yaml(path, "config")
        data = data or {}
    errs = validate(data, CONFIG_SCHEMA)
    if errs:
        key_path, msg = errs[0]
        line = lines.get(key_path) or lines.get(key_path[:1]) or 1
        raise RuleError(f"{path}:{line}: {'.'.join(_key(k) for k in key_path) or '(top)'}: {msg}")
    dirs = [_project_rule_dir(path, lines, i, d) for i, d in enumerate(data.get("rule_dirs", []))]
    return Config(path=path, rule_dirs=dirs,
                  rules=data.get("rules", {}), fail_on=data.get("fail_on"), step_marker=data.get("step_marker"))


def _project_rule_dir(path: Path, lines: dict, i: int, d: str) -> Path:
    """A config's ``rule_dirs`` entry, which must be inside the config's own folder (the project):
    a config can come with a repository, and a rule folder outside it (``~/.ssh``, ``/etc``)
    would have files that are no rules read and quoted in error lines. Refused in one line,
    before anything there is read; ``--rules`` takes a folder from anywhere."""
    base = path.parent
    project = base.resolve()
    try:
        real = (base / d).resolve()
        inside = real.is_relative_to(project)
    except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL byte
        inside = False
    if not inside:
        line = lines.get(("rule_dirs", i)) or lines.get(("rule_dirs",)) or 1
        raise RuleError(f"{path}:{line}: rule_dirs.{i}: {_short(d)} is outside the project folder {project}; a "
                        "configuration reads rules only from inside its own folder",
                        hint="move the rules into the project, or pass the folder with --rules")
    return base / d
