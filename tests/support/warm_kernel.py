"""A Jupyter kernel for the test runs, forked from a process that has already imported torch.

Every notebook run of `make test` starts a fresh kernel, and each fresh kernel spends about three
seconds importing torch and IPython before the notebook's first line runs, and most notebooks
another second in the parts of torch that load on first use: 16 notebooks, nbval on
three CPU paths and the Chinese twins, the runs twice in both editions, the offline pass. Here a
server imports them once (`PRELOADED`) and forks a kernel for each start; the kernel is a new
process that has run none of any notebook's code, as a fresh kernel is, and nothing else of the
course is imported ahead of the notebook. The runs a learner's own setup decides (JupyterLab in
the browser, emulated Colab) start ordinary kernels.

    python tests/support/warm_kernel.py -f CONNECTION_FILE   the kernel spec's command
    python tests/support/warm_kernel.py --spec FOLDER        write the spec into FOLDER/kernels/

The first kernel start starts the server (one per interpreter and environment, so a step that
forces torch's CPU kernels gets a server that imported torch under that setting). A kernel
start connects to it over a Unix socket and hands it its standard streams, environment, working
folder and arguments; the server forks, and the child becomes the kernel. The launcher stays as
the process Jupyter watches: a signal sent to it goes to the kernel, the launcher ends when the
kernel does, and the kernel ends when the launcher is gone. The server ends after IDLE_S seconds
with no kernel alive.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

#: What the server imports once, for every kernel it forks: torch, the kernel, and the parts of
#: torch that load on first use in most notebooks (the first optimizer imports torch._dynamo, the
#: first backward(gradient) symbolic_shapes: bench.py's one-time libraries).
PRELOADED = (
    "torch",
    "ipykernel.kernelapp",
    "torch._dynamo",
    "torch.fx.experimental.symbolic_shapes",
)
#: The kernel spec's name (`--nbval-kernel-name`, nbclient's `kernel_name`).
KERNEL_NAME = "course-warm"
#: Seconds the server waits with no kernel alive before it ends.
IDLE_S = 30
#: Environment variables that differ between two starts of the same setup.
_VOLATILE = ("JPY_", "PYTEST_", "KERNEL_LAUNCH_TIMEOUT")


def _socket_path() -> Path:
    """One server per interpreter and environment: its socket's path."""
    env = sorted((k, v) for k, v in os.environ.items() if not k.startswith(_VOLATILE))
    key = hashlib.sha256(json.dumps([sys.executable, env]).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"course-warm-{os.getuid()}-{key}.sock"


# --- the server ------------------------------------------------------------------------------


def _become_kernel(conn: socket.socket, request: dict, fds: list[int]) -> None:
    """In the forked child: take the launcher's streams, environment, folder and arguments, and
    run the kernel. Never returns."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")

    def exit_with_launcher() -> None:
        with contextlib.suppress(OSError):
            while conn.recv(1):
                pass
        os._exit(1)

    threading.Thread(target=exit_with_launcher, daemon=True).start()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sys.argv = ["ipykernel_launcher", *request["argv"]]
    code = 0
    try:
        from ipykernel.kernelapp import IPKernelApp

        IPKernelApp.launch_instance(argv=request["argv"])
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 0
    except BaseException:  # shown on the kernel's stderr, as ipykernel would show it
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def serve(path: Path) -> None:
    """Import PRELOADED, then fork a kernel for each connection until IDLE_S pass with none."""
    import importlib

    for name in PRELOADED:
        importlib.import_module(name)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # and remove the socket file
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener.bind(str(path))
    listener.listen(16)
    listener.settimeout(5)
    children: set[int] = set()
    last_alive = time.monotonic()
    try:
        while True:
            for pid in list(children):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        children.discard(pid)
            if children:
                last_alive = time.monotonic()
            elif time.monotonic() - last_alive > IDLE_S:
                return
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(None)
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
            request = json.loads(message.decode())
            pid = os.fork()
            if pid == 0:
                listener.close()
                _become_kernel(conn, request, fds)
            children.add(pid)
            for fd in fds:
                os.close(fd)
            conn.close()
    finally:
        listener.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# --- the launcher (the process Jupyter starts) -------------------------------------------------


def _try_connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None


def _connect(path: Path) -> socket.socket:
    """A connection to the server at `path`, started here when none answers (one launcher at a
    time starts it; a socket file left by a server that was killed is removed first)."""
    log_path = path.with_suffix(".log")
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if conn := _try_connect(path):
            return conn
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        with log_path.open("ab") as log:
            server = subprocess.Popen(
                [sys.executable, __file__, "--serve", str(path)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                cwd="/",
            )
        deadline = time.monotonic() + 120
        while server.poll() is None and time.monotonic() < deadline:
            if conn := _try_connect(path):
                return conn
            time.sleep(0.05)
    raise SystemExit(f"warm_kernel: no kernel server answered at {path}; its log: {log_path}")


def launch(argv: list[str]) -> int:
    """Have the server fork a kernel with this process's streams, environment, folder and
    `argv`; forward signals to it; end when it ends."""
    conn = _connect(_socket_path())
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = conn.recv(4096)
        if not chunk:
            return 1
        reply += chunk
    kernel = json.loads(reply)["pid"]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, lambda number, _frame: os.kill(kernel, number))
    with contextlib.suppress(OSError):
        while conn.recv(4096):  # the kernel holds the other end until it exits
            pass
    return 0


def jupyter_path(folder: Path, environ: dict[str, str]) -> str:
    """Jupyter's path (JUPYTER_PATH) of `environ` with `folder`, where write_spec wrote, first."""
    found = filter(None, environ.get("JUPYTER_PATH", "").split(os.pathsep))
    return os.pathsep.join([str(folder), *found])


def write_spec(folder: Path) -> Path:
    """The kernel spec that starts kernels through this file, in FOLDER/kernels/KERNEL_NAME."""
    spec = folder / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, str(Path(__file__).resolve()), "-f", "{connection_file}"],
                "display_name": "Python 3 (torch preloaded, for the tests)",
                "language": "python",
                "interrupt_mode": "signal",
            },
            indent=1,
        )
    )
    return spec


@contextlib.contextmanager
def spec_on_path() -> Iterator[str]:
    """For the block, the spec in a temporary folder that this process's Jupyter path (and its
    children's) finds first; its kernel name, for a kernel manager to start."""
    with tempfile.TemporaryDirectory(prefix="kernels-") as folder:
        write_spec(Path(folder))
        os.environ["JUPYTER_PATH"] = jupyter_path(Path(folder), os.environ)
        yield KERNEL_NAME


def main() -> int:
    """Command line."""
    if sys.argv[1:2] == ["--serve"]:
        serve(Path(sys.argv[2]))
        return 0
    if sys.argv[1:2] == ["--spec"]:
        print(write_spec(Path(sys.argv[2])))
        return 0
    return launch(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
