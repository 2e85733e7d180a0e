"""Run the per-rank summaries: in this process, on a local process pool, or on a Dask cluster.

Only :func:`nsysdoc.jobs.summary.summarize_file`'s small results come back; each worker reads its
rank's capture from storage it can see (on Dask, the paths must be valid on the workers).
``progress(done, total, record)`` is called as each capture finishes, in completion order.
"""
from __future__ import annotations

import os
from typing import Callable

from ..errors import InputError
from .summary import summarize_file

Progress = Callable[[int, int, list], None]
#: a one-line status text that is no rank's progress (waiting for a Dask worker to join)
Notice = Callable[[str], None]
DASK_HINT = "install the extra: pip install 'nsysdoc[dask]'"
DASK_ADDRESS_HINT = "pass the scheduler's address, as the scheduler prints it: --dask tcp://HOST:8786"
#: seconds to connect to a Dask scheduler and hear its greeting (the probe), then again for the client
CONNECT_TIMEOUT_S = 10.0
#: a scheduler's greeting (its handshake message) is a few hundred bytes; a length over this is not Dask
_MAX_GREETING = 1 << 20
#: seconds a job waits while the scheduler has no worker (none joined, or all left) before it fails;
#: ``NSYSDOC_DASK_WORKER_TIMEOUT`` overrides it
WORKER_TIMEOUT_S = 120.0
WORKER_TIMEOUT_ENV = "NSYSDOC_DASK_WORKER_TIMEOUT"
#: seconds between two "waiting for a Dask worker" notices
NOTICE_EVERY_S = 10.0
#: seconds between two checks of the scheduler's workers while no rank finishes
_POLL_S = 0.5


def _default_jobs(n: int) -> int:
    return max(1, min(n, os.cpu_count() or 1))


def run_local(files: list[str], options: dict, jobs: int | None = None,
              progress: Progress | None = None, notice: Notice | None = None) -> list[list[dict]]:
    """Summaries per file, in the order of ``files``. ``jobs`` = 1 runs in this process.

    More jobs run on :class:`WorkerPool` (``python -m nsysdoc.jobs.worker`` processes), which never
    re-imports the caller's ``__main__``: a plain script or a notebook needs no main guard. When no
    worker process can be started (a frozen application, an interpreter embedded in another
    program), the captures run one at a time in this process and ``notice`` hears why (one line;
    without ``notice``, one line on stderr)."""
    jobs = _default_jobs(len(files)) if jobs is None else max(1, jobs)
    out: list[list[dict] | None] = [None] * len(files)
    pool = None
    if jobs > 1 and len(files) > 1:
        try:
            pool = WorkerPool(min(jobs, len(files)))
        except WorkerStartError as exc:
            _say(notice, f"warning: cannot start worker processes ({exc}); running the {len(files)} captures "
                         "one at a time in this process")
    if pool is None:
        for i, f in enumerate(files):
            out[i] = summarize_file(f, options)
            if progress:
                progress(i + 1, len(files), out[i])
        return out  # type: ignore[return-value]
    try:
        for done, (i, recs) in enumerate(pool.map(SUMMARIZE, [(f, options) for f in files], label=files), 1):
            out[i] = recs
            if progress:
                progress(done, len(files), out[i])
    finally:  # Ctrl-C, or the caller's progress callback failed: stop the workers, do not wait
        pool.close()
    return out  # type: ignore[return-value]


#: what a local worker runs for each capture
SUMMARIZE = "nsysdoc.jobs.summary:summarize_file"
#: characters of a dead worker's last stderr line quoted in its rank's error
_STDERR_TAIL = 200


def _say(notice: Notice | None, text: str) -> None:
    if notice is not None:
        notice(text)
        return
    import sys

    try:
        sys.stderr.write(f"nsysdoc: {text}\n")
    except (OSError, ValueError, AttributeError):
        pass


class WorkerStartError(Exception):
    """No worker process could be started (the message says why)."""


class _Worker:
    """One ``python -m nsysdoc.jobs.worker`` process, its pipes and its stderr (a temporary file)."""

    def __init__(self) -> None:
        import subprocess
        import sys
        import tempfile

        exe = sys.executable
        if not exe or getattr(sys, "frozen", False):
            raise WorkerStartError("this Python has no interpreter to start (sys.executable is "
                                   f"{exe!r}{', a frozen application' if getattr(sys, 'frozen', False) else ''})")
        self.err = tempfile.TemporaryFile()
        kwargs: dict = {}
        if os.name == "nt":  # a Ctrl-C in the console reaches the parent only; it stops the workers
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)
        try:
            with _sigint_ignored():  # the worker begins life with SIGINT blocked, until it ignores it
                self.proc = subprocess.Popen([exe, "-c", _bootstrap()], stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=self.err, **kwargs)
        except (OSError, ValueError) as exc:
            self.err.close()
            raise WorkerStartError(f"{type(exc).__name__}: {exc}") from None
        self.is_ready = False

    def ready(self) -> "_Worker":
        """Wait for the worker's greeting (it imported nsysdoc); WorkerStartError when it does not
        come (then the process is gone)."""
        from .worker import read_frame

        if self.is_ready:
            return self
        exe = self.proc.args[0]
        try:
            hello = read_frame(self.proc.stdout)
        except Exception:
            hello = None
        if not (isinstance(hello, tuple) and hello[:1] == ("ready",)):
            why = self.ended()
            self.kill()
            raise WorkerStartError(f"{exe} did not start a worker: {why}")
        self.is_ready = True
        return self

    def run(self, target: str, args: tuple):
        """("ok", result) or ("error", text); EOFError when the process died."""
        from .worker import read_frame, write_frame

        try:
            write_frame(self.proc.stdin, (target, args))
        except (OSError, ValueError):
            raise EOFError from None
        return read_frame(self.proc.stdout)

    def ended(self) -> str:
        """Why the process ended: its exit status and its stderr's last line."""
        try:
            code = self.proc.wait(timeout=5)
        except Exception:
            code = None
        what = ("still running" if code is None else f"killed by signal {-code}" if code < 0
                else f"exit status {code}")
        try:
            self.err.seek(0)
            lines = [ln.strip() for ln in self.err.read().decode("utf-8", "replace").splitlines() if ln.strip()]
        except (OSError, ValueError):
            lines = []
        return what + (f", {lines[-1][:_STDERR_TAIL]}" if lines else "")

    def stop(self) -> None:
        """End the worker when it has finished (an empty frame, then close its pipes)."""
        from .worker import write_frame

        try:
            write_frame(self.proc.stdin, None)
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:
            self.kill()
        self._pass_on_stderr()
        self._close()

    def _pass_on_stderr(self) -> None:
        """What a healthy worker wrote to stderr (warnings), on this process's stderr, as a
        worker of a ``multiprocessing`` pool would have shown it (at most the last 4 KB)."""
        import sys

        try:
            self.err.seek(0, 2)
            size = self.err.tell()
            if not size:
                return
            self.err.seek(max(0, size - 4096))
            sys.stderr.write(self.err.read().decode("utf-8", "replace"))
        except (OSError, ValueError, AttributeError):
            pass

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.wait(timeout=5)
        except Exception:
            pass
        self._close()

    def _close(self) -> None:
        for f in (getattr(self.proc, "stdin", None), getattr(self.proc, "stdout", None), self.err):
            try:
                if f is not None:
                    f.close()
            except Exception:
                pass


def _bootstrap() -> str:
    """The worker's ``-c`` program: import nsysdoc from where this process imported it (an
    editable install, a source tree on PYTHONPATH, a wheel), never from the current folder."""
    # nsysdoc/jobs/run.py -> the folder holding nsysdoc/ (not ``import nsysdoc``: the package face
    # imports the API, which imports this module)
    home = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return ("import os, sys\n"
            f"home = {home!r}\n"
            "sys.path[:] = [p for p in sys.path if p not in ('', '.')]\n"
            "if os.path.normcase(os.path.abspath(home)) not in "
            "[os.path.normcase(os.path.abspath(p)) for p in sys.path]:\n"
            "    sys.path.insert(0, home)\n"
            "from nsysdoc.jobs.worker import main\n"
            "sys.exit(main())\n")


class WorkerPool:
    """``n`` worker processes (:mod:`nsysdoc.jobs.worker`), each fed by a thread of this process.

    The first worker is started at once: :class:`WorkerStartError` when it cannot be (then the
    caller runs in-process). A worker that dies (killed, out of memory) fails only the task it was
    running, as ``worker failed: <why>`` naming that input; a fresh worker takes the next task."""

    def __init__(self, n: int) -> None:
        import threading

        self.n = max(1, n)
        self._lock = threading.Lock()
        self._closed = False
        # all started at once (each pays its own interpreter start-up and imports, in parallel);
        # the first one's greeting decides whether worker processes work here at all
        self._workers: list[_Worker] = [_Worker()]
        try:
            for _ in range(self.n - 1):
                self._workers.append(_Worker())
            self._workers[0].ready()
        except WorkerStartError:
            self.close()
            raise

    def _new_worker(self) -> _Worker:
        w = _Worker().ready()
        with self._lock:
            if self._closed:
                w.kill()
                raise WorkerStartError("the pool was closed")
            self._workers.append(w)
        return w

    def _forget(self, w: _Worker) -> None:
        with self._lock:
            if w in self._workers:
                self._workers.remove(w)

    def map(self, target: str, tasks: list[tuple], label: list[str] | None = None):
        """Yield ``(index, result)`` as tasks finish; a failed task's result is a failed record
        ``[{"file": label[i], "ok": False, "error": ...}]``."""
        import queue
        import threading

        todo: "queue.SimpleQueue[int]" = queue.SimpleQueue()
        for i in range(len(tasks)):
            todo.put(i)
        done: "queue.SimpleQueue[tuple[int, object]]" = queue.SimpleQueue()
        labels = label or [str(i) for i in range(len(tasks))]

        def failed(i: int, why: str) -> list[dict]:
            return [{"file": labels[i], "ok": False, "error": f"worker failed: {why}"}]

        def feed(worker: _Worker | None) -> None:
            while not self._closed:
                try:
                    i = todo.get_nowait()
                except queue.Empty:
                    break
                try:
                    worker = self._new_worker() if worker is None else worker.ready()
                except WorkerStartError as exc:
                    if worker is not None:
                        self._forget(worker)
                        worker = None
                    done.put((i, failed(i, f"cannot start a worker process: {exc}")))
                    continue
                try:
                    kind, value = worker.run(target, tasks[i])
                except EOFError:  # the process died with this task
                    why = worker.ended()
                    worker.kill()
                    self._forget(worker)
                    worker = None
                    done.put((i, failed(i, f"the worker process ended ({why}) while reading {labels[i]}")))
                    continue
                except Exception as exc:  # an answer that cannot be read
                    done.put((i, failed(i, f"{type(exc).__name__}: {exc}")))
                    continue
                done.put((i, value if kind == "ok" else failed(i, str(value))))
            if worker is not None:
                worker.stop()
                self._forget(worker)

        started = list(self._workers)
        threads = [threading.Thread(target=feed, args=(started[k] if k < len(started) else None,), daemon=True,
                                    name=f"nsysdoc-worker-{k}") for k in range(min(self.n, len(tasks)))]
        for w in started[len(threads):]:  # more workers than tasks
            w.stop()
            self._forget(w)
        for t in threads:
            t.start()
        for _ in range(len(tasks)):
            while True:  # a timeout keeps Ctrl-C deliverable on every platform
                try:
                    yield done.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
        for t in threads:
            t.join()

    def close(self) -> None:
        """Kill the workers still running (their tasks' results are not wanted)."""
        with self._lock:
            self._closed = True
            workers = list(self._workers)
        for w in workers:
            if w.proc.poll() is None:
                w.kill()


class _sigint_ignored:
    """Block SIGINT in this (main) thread while worker processes are spawned: a spawned Python
    starts with it blocked (the mask survives exec) until its initializer ignores and unblocks it,
    so a Ctrl-C while a worker is still importing cannot print its traceback. Here the signal stays
    pending and is delivered when the block ends: no Ctrl-C is lost."""

    def __enter__(self):
        import signal
        import threading

        self.blocked = False
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            self.blocked = True
        return self

    def __exit__(self, *exc) -> None:
        import signal

        if self.blocked:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _ignore_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # blocked by the parent while spawning


def terminate_pool(pool) -> None:
    """Cancel what has not started and terminate the worker processes (not waiting for them)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    try:
        pool.shutdown(wait=False, cancel_futures=True)
    except Exception:
        pass
    for p in procs:
        try:
            p.terminate()
        except Exception:
            pass
    for p in procs:
        try:
            p.join(0.5)
            if p.is_alive():
                p.kill()
        except Exception:
            pass


def probe_scheduler(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise InputError unless a plain ``tcp://`` address answers like a Dask scheduler within
    ``timeout`` seconds. A scheduler speaks first: it sends its handshake (an 8-byte length, then
    msgpack frames naming its pickle protocol) as soon as a client connects. Anything else (an
    HTTP server waiting for a request, a socket that stays silent or sends random bytes) would make
    ``distributed`` hang or try to allocate the "length" it read (exabytes). Other schemes (tls://,
    ucx://, inproc://) are left to ``distributed`` and its timeout."""
    import socket
    import struct
    import time

    raw = address.strip()
    scheme, _, rest = raw.rpartition("://")
    if scheme not in ("", "tcp"):
        return
    host, sep, port_s = rest.rpartition(":")
    host = host.strip("[]")
    try:
        port = int(port_s) if sep else 8786
    except ValueError:
        raise InputError(f"--dask {address!r}: not an address (expected tcp://HOST:PORT)", hint=DASK_ADDRESS_HINT)
    if not (0 < port < 65536) or not (host or not sep):
        raise InputError(f"--dask {address!r}: not an address (expected tcp://HOST:PORT)", hint=DASK_ADDRESS_HINT)
    where = f"the Dask scheduler at {address}"
    deadline = time.monotonic() + timeout

    def left() -> float:
        return max(0.01, deadline - time.monotonic())

    def recv_exact(sock, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            sock.settimeout(left())
            chunk = sock.recv(min(n - len(buf), 65536))
            if not chunk:
                raise InputError(f"cannot connect to {where}: the server closed the connection without "
                                 "greeting like a Dask scheduler", hint=DASK_ADDRESS_HINT)
            buf += chunk
        return buf

    try:
        with socket.create_connection((host or "127.0.0.1", port), timeout=left()) as sock:
            head = recv_exact(sock, 8)
            (n,) = struct.unpack("<Q", head)
            if not 16 <= n <= _MAX_GREETING:
                raise InputError(f"cannot connect to {where}: the server there is not a Dask scheduler "
                                 f"(its first bytes {head[:8]!r} are no Dask greeting)", hint=DASK_ADDRESS_HINT)
            body = recv_exact(sock, n)
            if b"pickle-protocol" not in body and b"compression" not in body:
                raise InputError(f"cannot connect to {where}: the server there is not a Dask scheduler "
                                 "(its greeting is no Dask handshake)", hint=DASK_ADDRESS_HINT)
    except InputError:
        raise
    except (socket.timeout, TimeoutError):
        raise InputError(f"cannot connect to {where}: no Dask greeting within {timeout:g} s (is it a Dask "
                         "scheduler?)", hint=DASK_ADDRESS_HINT) from None
    except (OSError, ValueError, UnicodeError, OverflowError) as exc:
        raise InputError(f"cannot connect to {where}: {getattr(exc, 'strerror', None) or exc}",
                         hint=DASK_ADDRESS_HINT) from None


def worker_timeout(value: float | str | None = None) -> float:
    """Seconds to wait while a Dask scheduler has no worker: ``value``, else
    ``$NSYSDOC_DASK_WORKER_TIMEOUT``, else :data:`WORKER_TIMEOUT_S`. A value that is not a positive
    number of seconds is an InputError (one line)."""
    where = "the Dask worker timeout"
    if value is None:
        value = os.environ.get(WORKER_TIMEOUT_ENV)
        where = WORKER_TIMEOUT_ENV
        if value is None or not str(value).strip():
            return WORKER_TIMEOUT_S
    try:
        t = float(value)
    except (TypeError, ValueError):
        t = float("nan")
    if not (0 < t <= 86400 * 7):  # NaN fails too
        raise InputError(f"{where}: {str(value)[:40]!r} is not a number of seconds (more than 0, at most a week)")
    return t


def _workers(client) -> int | None:
    """How many workers the scheduler has now (None when it cannot be asked: then assume some)."""
    try:
        return len(client.nthreads())
    except Exception:
        return None


def run_dask(files: list[str], options: dict, address: str, progress: Progress | None = None, *,
             labels: list[str] | None = None, notice: Notice | None = None,
             timeout: float | None = None) -> list[list[dict]]:
    """The same on an existing Dask cluster (``tcp://scheduler:8786``).

    A cluster is trusted (docs/job.md, "Trusting a Dask cluster"): its results are unpickled here.
    Each result is still checked (:func:`nsysdoc.jobs.check.check_records`) before anything reads
    it; a malformed one stops the job (InputError naming ``labels[i]``, the rank). While the
    scheduler has no worker (none joined yet, or all left), ``notice`` hears so every
    :data:`NOTICE_EVERY_S` seconds, and after ``timeout`` seconds (:func:`worker_timeout`) the job
    fails (InputError) instead of waiting forever."""
    import time

    from .check import check_records, one_line

    try:
        from distributed import Client, wait
    except ImportError:
        raise InputError("--dask needs dask.distributed, which is not installed", hint=DASK_HINT)
    limit = worker_timeout(timeout)
    labels = labels or [os.path.basename(f) for f in files]
    probe_scheduler(address)
    try:
        client = Client(address, timeout=f"{CONNECT_TIMEOUT_S:g}s")
    except (Exception, MemoryError) as exc:  # whatever distributed raises: one line, never a traceback
        raise InputError(f"cannot connect to the Dask scheduler at {address}: {type(exc).__name__}: "
                         f"{str(exc)[:200]}", hint=DASK_ADDRESS_HINT) from None
    out: list[list[dict] | None] = [None] * len(files)
    try:
        futs = [client.submit(summarize_file, f, options, key=f"nsysdoc-rank-{i}-{abs(hash(f))}", pure=False)
                for i, f in enumerate(files)]
        index = {fut.key: i for i, fut in enumerate(futs)}
        pending = set(futs)
        done_count = 0
        idle_since: float | None = None  # when the scheduler was first seen without a worker
        seen_worker = False
        last_notice = -NOTICE_EVERY_S
        while pending:
            try:
                finished, _ = wait(list(pending), timeout=_POLL_S, return_when="FIRST_COMPLETED")
            except TimeoutError:
                finished = set()
            if not finished:
                n = _workers(client)
                now = time.monotonic()
                if n != 0:
                    seen_worker = seen_worker or bool(n)
                    idle_since = None
                    continue
                idle_since = now if idle_since is None else idle_since
                waited = now - idle_since
                what = "all its workers left" if seen_worker else "no worker has joined it"
                if waited >= limit:
                    raise InputError(f"the Dask scheduler at {address} has no worker: {what} in {limit:g} s "
                                     f"({done_count} of {len(files)} ranks done)",
                                     hint=f"start workers (dask worker {address}) or set {WORKER_TIMEOUT_ENV} "
                                          "(seconds) to wait longer")
                if notice and now - last_notice >= NOTICE_EVERY_S:
                    notice(f"waiting for a Dask worker: the scheduler at {address} has none ({what}); "
                           f"giving up after {limit:g} s")
                    last_notice = now
                continue
            idle_since = None
            seen_worker = True
            for fut in finished:
                pending.discard(fut)
                i = index[fut.key]
                try:
                    recs = fut.result()
                except Exception as exc:  # the task failed on the worker (e.g. nsysdoc missing there)
                    recs = [{"file": files[i], "ok": False,
                             "error": one_line(f"Dask task failed: {type(exc).__name__}: {exc}", 300)}]
                else:
                    check_records(recs, files[i], options, labels[i])
                out[i] = recs
                done_count += 1
                if progress:
                    progress(done_count, len(files), out[i])
    finally:
        client.close()
    return out  # type: ignore[return-value]
