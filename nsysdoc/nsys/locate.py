"""Find the ``nsys`` binary, its version and the profile switches it accepts."""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..errors import NsysNotFoundError
from ..outputs import EXPORT_MARKER_SUFFIX


USER_GUIDE = "https://docs.nvidia.com/nsight-systems/UserGuide/index.html"

#: Where nsys commonly lives when it is not on PATH (CUDA toolkit and standalone installers).
DEFAULT_FALLBACK_GLOBS: tuple[str, ...] = (
    "/usr/local/cuda/bin/nsys",
    "/usr/local/cuda-*/bin/nsys",
    "/opt/nvidia/nsight-systems/*/bin/nsys",
    "/opt/nvidia/nsight-systems-cli/*/bin/nsys",
)

INSTALL_HINT = (
    "install NVIDIA Nsight Systems (it ships with the CUDA Toolkit as <cuda>/bin/nsys, or as a "
    "standalone package from https://developer.nvidia.com/nsight-systems), then put nsys on PATH "
    "or select a binary with NSYS=/path/to/nsys or --nsys PATH"
)

STDERR_TAIL_LINES = 15
_STDERR_KEEP_BYTES = 256 * 1024  # what run_capture keeps of nsys stderr for diagnosis

from ..formats import OLD_REP_SUFFIX  # noqa: E402,F401 - nsys before 2021.4 wrote .qdrep
MARKER_SUFFIX = EXPORT_MARKER_SUFFIX  # ownership sidecar: run.sqlite.nsysdoc

#: A function that runs a short, non-interactive command (``nsys --version``, ``nsys export``)
#: and returns its CompletedProcess with text stdout/stderr. Injected in tests.
Runner = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


# ----------------------------------------------------------------------------------------------
# finding nsys and its version
# ----------------------------------------------------------------------------------------------

def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _resolve_candidate(value: str, path_env: str | None) -> str | None:
    """A user-given binary: a path (contains a separator) or a name looked up on PATH."""
    expanded = os.path.expanduser(value)
    if os.sep in expanded or (os.altsep and os.altsep in expanded):
        return os.path.abspath(expanded) if _executable(expanded) else None
    found = shutil.which(expanded, path=path_env)
    if found:
        return found
    return os.path.abspath(expanded) if _executable(expanded) else None


def find_nsys(
    explicit: str | None = None,
    environ: Mapping[str, str] | None = None,
    *,
    fallback_globs: Iterable[str] = DEFAULT_FALLBACK_GLOBS,
) -> str:
    """Locate the nsys binary: ``--nsys PATH`` wins, then ``$NSYS``, then ``nsys`` on PATH, then
    the usual install folders (``fallback_globs``, newest first). Raises NsysNotFoundError."""
    env = os.environ if environ is None else environ
    path_env = env.get("PATH", "")
    if explicit:
        found = _resolve_candidate(explicit, path_env)
        if not found:
            raise NsysNotFoundError(f"--nsys {explicit}: no such executable", hint=INSTALL_HINT)
        return found
    from_env = env.get("NSYS")
    if from_env:
        found = _resolve_candidate(from_env, path_env)
        if not found:
            raise NsysNotFoundError(f"NSYS={from_env}: no such executable", hint=INSTALL_HINT)
        return found
    found = shutil.which("nsys", path=path_env)
    if found:
        return found
    for pattern in fallback_globs:
        for candidate in sorted(glob.glob(pattern), reverse=True):  # newest version dir first
            if _executable(candidate):
                return candidate
    raise NsysNotFoundError("nsys (NVIDIA Nsight Systems CLI) not found", hint=INSTALL_HINT)


#: what a short nsys command's output keeps: its first and its last bytes, each stream
RUN_KEEP_BYTES = 256 * 1024
#: how long the output of a command that has exited is still read (a child it left behind may
#: hold the pipes open for ever: nsysdoc waits on the process, not on the end of its output)
RUN_DRAIN_SECONDS = 1.0


class _Kept:
    """The head and the tail of a stream, at most ``2 * limit`` bytes whatever it writes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail.append(data)
        self.tail_size += len(data)
        while self.tail_size > self.limit:
            first = self.tail.popleft()
            over = self.tail_size - self.limit
            if len(first) > over:  # keep the end of this chunk
                self.tail.appendleft(first[over:])
                self.dropped += over
                self.tail_size -= over
            else:
                self.dropped += len(first)
                self.tail_size -= len(first)

    def text(self) -> str:
        gap = f"\n[... {self.dropped:,} bytes left out ...]\n".encode() if self.dropped else b""
        return (bytes(self.head) + gap + b"".join(self.tail)).decode("utf-8", "replace")


def run_bounded(argv: Sequence[str], *, keep: int = RUN_KEEP_BYTES,
                drain_s: float = RUN_DRAIN_SECONDS) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (stdin from /dev/null) and return its exit code and output, keeping at most
    ``keep`` bytes of the start and of the end of each stream (a command printing gigabytes costs
    no memory). Returns when the process has exited: output still arriving is read for ``drain_s``
    seconds more, then the pipes are closed (a background child holding them is not waited for)."""
    import selectors
    import time

    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    kept = {proc.stdout: _Kept(keep), proc.stderr: _Kept(keep)}
    sel = selectors.DefaultSelector()
    for stream in kept:
        os.set_blocking(stream.fileno(), False)
        sel.register(stream, selectors.EVENT_READ)
    exited_at: float | None = None
    try:
        while sel.get_map():
            if exited_at is None and proc.poll() is not None:
                exited_at = time.monotonic()
            if exited_at is not None:
                left = exited_at + drain_s - time.monotonic()
                if left <= 0:
                    break
                timeout = min(left, 0.1)
            else:
                timeout = 0.1
            for key, _ in sel.select(timeout):
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    kept[key.fileobj].add(data)
                else:
                    sel.unregister(key.fileobj)
        rc = proc.wait()
    finally:
        sel.close()
        for stream in kept:
            stream.close()
        if proc.returncode is None:  # interrupted: do not leave nsys running
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(list(argv), rc, kept[proc.stdout].text(), kept[proc.stderr].text())


def _default_runner(argv: Sequence[str]) -> subprocess.CompletedProcess[str]:
    try:
        return run_bounded(argv)
    except FileNotFoundError:
        raise NsysNotFoundError(f"{argv[0]}: no such executable", hint=INSTALL_HINT) from None
    except PermissionError:
        raise NsysNotFoundError(f"{argv[0]}: not executable", hint=INSTALL_HINT) from None


_VERSION_RE = re.compile(r"\bversion\s+(\d+(?:\.\d+){1,3})", re.IGNORECASE)


def parse_nsys_version(text: str) -> tuple[int, ...] | None:
    """``NVIDIA Nsight Systems version 2024.6.2.225-246235244400v0`` -> ``(2024, 6, 2, 225)``."""
    m = _VERSION_RE.search(text or "")
    if not m:
        m = re.search(r"\b(20\d\d\.\d+(?:\.\d+){0,2})", text or "")
        if not m:
            return None
    return tuple(int(p) for p in m.group(1).split("."))


def nsys_version(nsys: str, runner: Runner | None = None) -> tuple[int, ...] | None:
    """Run ``nsys --version`` and parse it; None when it fails or prints something unexpected."""
    run = runner or _default_runner
    try:
        proc = run([nsys, "--version"])
    except (OSError, NsysNotFoundError):
        return None
    if proc.returncode != 0:
        return None
    return parse_nsys_version(f"{proc.stdout or ''}\n{proc.stderr or ''}")


def version_str(version: Sequence[int] | None) -> str:
    return ".".join(str(v) for v in version) if version else "(unknown version)"


_SWITCH_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def parse_profile_switches(help_text: str) -> frozenset[str]:
    """Long switches (``--trace``, ``--gpu-metrics-devices``...) named in ``nsys profile --help``."""
    return frozenset(_SWITCH_RE.findall(help_text or ""))


def nsys_profile_switches(nsys: str, runner: Runner | None = None) -> frozenset[str] | None:
    """The switches this nsys' ``profile`` command knows, from ``nsys profile --help``.

    Returns None when the help could not be read or does not look like nsys help (so callers
    never refuse a capture because of an unexpected help format)."""
    run = runner or _default_runner
    try:
        proc = run([nsys, "profile", "--help"])
    except (OSError, NsysNotFoundError):
        return None
    switches = parse_profile_switches(f"{proc.stdout or ''}\n{proc.stderr or ''}")
    return switches if _looks_like_profile_help(switches) else None


def _looks_like_profile_help(switches: frozenset[str] | None) -> bool:
    return switches is not None and {"--trace", "--output"} <= switches


