"""A local job worker process: ``python -m nsysdoc.jobs.worker`` (issue 49).

:func:`nsysdoc.jobs.run.run_local` starts these with ``subprocess`` instead of a
``multiprocessing`` pool. ``spawn`` and ``forkserver`` start each worker by re-importing the
caller's ``__main__`` (``multiprocessing.spawn._fixup_main_from_path``): a plain script without
``if __name__ == "__main__":`` then runs again in every worker (its output printed once per
worker, and its own ``nsysdoc.job(...)`` call fails with the "bootstrapping phase" error). A worker
started here imports nsysdoc only, never the caller's script or notebook, on Linux, macOS and
Windows alike (``fork`` would not re-import, but it is not available on Windows, is no longer
the default on macOS, and copies the parent's threads and open SQLite handles).

Protocol, on the worker's stdin and stdout: frames of an 8-byte little-endian length and a pickle
(parent and worker are the same program; nothing else writes to these pipes). The worker sends
``("ready", pid)``, then for each task ``(target, args)`` (``target`` = ``"module:function"``)
answers ``("ok", result)`` or ``("error", "Type: message")``; an empty frame (or the end of its
stdin) stops it. Anything the task prints goes to stderr: stdout carries only frames.
"""
from __future__ import annotations

import os
import pickle
import struct
import sys

_HEAD = struct.Struct("<Q")


def write_frame(f, obj) -> None:
    data = b"" if obj is None else pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_HEAD.pack(len(data)) + data)
    f.flush()


def read_frame(f):
    """The next frame's object; None for an empty frame; EOFError when the other side is gone."""
    head = f.read(_HEAD.size)
    if len(head) < _HEAD.size:
        raise EOFError
    (n,) = _HEAD.unpack(head)
    if n == 0:
        return None
    data = f.read(n)
    if len(data) < n:
        raise EOFError
    return pickle.loads(data)


def _resolve(target: str):
    import importlib

    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def main() -> int:
    import signal

    # the parent stops its workers; a Ctrl-C must not print a traceback from each. It started this
    # process with SIGINT blocked (nsysdoc.jobs.run._sigint_ignored): ignore it, then unblock it
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    out = os.fdopen(os.dup(1), "wb")  # the frames' channel
    os.dup2(2, 1)  # print() and C libraries writing to stdout now write to stderr
    inp = sys.stdin.buffer
    write_frame(out, ("ready", os.getpid()))
    while True:
        try:
            task = read_frame(inp)
        except EOFError:
            return 0
        if task is None:
            return 0
        target, args = task
        try:
            answer = ("ok", _resolve(target)(*args))
        except Exception as exc:
            answer = ("error", f"{type(exc).__name__}: {exc}")
        write_frame(out, answer)


if __name__ == "__main__":
    sys.exit(main())
