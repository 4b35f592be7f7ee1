"""Start TensorFlow's own tf.data service servers (dispatcher, worker) for tfpipe.

The servers are `tf.data.experimental.service.DispatchServer` / `WorkerServer`;
nothing here is home-made cluster code. What tfpipe adds: a worker loads
tfpipe's native kernels before it serves, so a pipeline graph that uses them
(`build_pipeline(..., service=...)`) runs there; sensible timeouts; and a
`serve_forever` that stops cleanly on SIGTERM / SIGINT (`tfpipe service ...`).

Security: the tf.data service has no authentication and no encryption, and
TensorFlow's servers listen on EVERY interface of the host (gRPC binds
`[::]:port`; TF offers no option to bind one address). The addresses tfpipe
advertises default to 127.0.0.1, which keeps clients on this host, but the
ports are still open to the network: run dispatchers and workers only inside a
private network or behind a firewall (docs/scale.md).
"""

from __future__ import annotations

import logging
import signal
import threading
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("tfpipe.service")

LOOPBACK = "127.0.0.1"
# A worker that misses heartbeats this long is logged as lost by the dispatcher
# ("Lost worker HOST:PORT due to timeout"); TF's default is 10 s. That is all
# TF does with it: the worker stays registered, its tasks stay in their jobs and
# it gets a task in every new job, so a client reading such a job waits for it
# forever. Clients bound that wait themselves (build_pipeline's service_timeout_s).
WORKER_TIMEOUT_MS = 10_000
# The dispatcher looks for lost workers (and unused jobs) only in its maintenance
# pass, every job_gc_check_interval_ms: TF's default is 10 minutes, so a lost
# worker would go unnoticed that long. Once a second costs next to nothing.
CHECK_INTERVAL_MS = 1_000
HEARTBEAT_MS = 1_000


@dataclass
class Dispatcher:
    """A running dispatcher: `target` is what clients pass as `service=`."""

    server: Any  # tf.data.experimental.service.DispatchServer
    host: str
    port: int

    @property
    def target(self) -> str:
        return f"grpc://{self.host}:{self.port}"

    @property
    def address(self) -> str:
        """HOST:PORT, what workers pass as `--dispatcher`."""
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        self.server._stop()  # noqa: SLF001 - TF's servers expose no public stop()


@dataclass
class Worker:
    server: Any  # tf.data.experimental.service.WorkerServer
    address: str  # HOST:PORT advertised to the dispatcher and clients
    native: bool  # tfpipe's native kernels are loaded in this process

    def stop(self) -> None:
        self.server._stop()  # noqa: SLF001 - TF's servers expose no public stop()


def _port(address: str, flag: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"{flag}: expected HOST:PORT, got {address!r}")
    return host.strip("[]"), int(port)


def start_dispatcher(port: int = 0, work_dir: str | None = None, host: str = LOOPBACK,
                     worker_timeout_ms: int = WORKER_TIMEOUT_MS,
                     job_gc_timeout_ms: int | None = None) -> Dispatcher:
    """Start a dispatcher on `port` (0: a free one), native kernels loaded.

    With `work_dir` it runs in fault-tolerant mode: its state is journaled
    there, and a dispatcher restarted on the same port and directory resumes
    the registered datasets and jobs. `host` is only the address reported in
    `target` (TF binds every interface; see the module docstring). The
    dispatcher builds each registered graph (split providers for `dynamic`), so
    it needs the kernels too.
    """
    import tensorflow as tf

    from tfpipe import native

    if not native.available():
        log.warning("tfpipe.service dispatcher: %s", native.status()["detail"])

    if port < 0 or port > 65535:
        raise ValueError(f"port: must be 0..65535, got {port}")
    for name, value in (("worker_timeout_ms", worker_timeout_ms),
                        ("job_gc_timeout_ms", job_gc_timeout_ms)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or value < 100):
            raise ValueError(f"{name}: must be an int >= 100 (milliseconds), got {value!r}")
    kw: dict[str, Any] = {"port": port, "worker_timeout_ms": worker_timeout_ms,
                          "job_gc_check_interval_ms": CHECK_INTERVAL_MS}
    if work_dir:
        kw.update(work_dir=str(work_dir), fault_tolerant_mode=True)
    if job_gc_timeout_ms is not None:
        kw["job_gc_timeout_ms"] = job_gc_timeout_ms
    svc = tf.data.experimental.service
    server = svc.DispatchServer(svc.DispatcherConfig(**kw), start=True)
    bound = int(server.target.rsplit(":", 1)[1])
    return Dispatcher(server, host, bound)


def start_worker(dispatcher: str, port: int = 0, host: str = LOOPBACK,
                 heartbeat_ms: int = HEARTBEAT_MS) -> Worker:
    """Start a worker for the dispatcher at `dispatcher` (HOST:PORT or grpc://HOST:PORT).

    The native kernels are loaded first (`tfpipe.native.load()`): a dataset graph
    that uses them cannot run in a process that lacks them. Without a built
    library the worker still serves pure-TF graphs; a client whose graph uses the
    native ops then fails with TF's "Op type not registered" error from the worker.
    `heartbeat_ms`: how often it reports to the dispatcher (and picks up new tasks).
    """
    target = dispatcher.removeprefix("grpc://")
    _port(target, "--dispatcher")  # before importing TensorFlow: fail fast
    if isinstance(heartbeat_ms, bool) or not isinstance(heartbeat_ms, int) or heartbeat_ms < 100:
        raise ValueError(f"heartbeat_ms: must be an int >= 100 (milliseconds), "
                         f"got {heartbeat_ms!r}")

    import tensorflow as tf

    from tfpipe import native

    loaded = native.available()
    if not loaded:
        log.warning("tfpipe.service worker: %s", native.status()["detail"])
    svc = tf.data.experimental.service
    config = svc.WorkerConfig(dispatcher_address=target, worker_address=f"{host}:%port%",
                              port=port, heartbeat_interval_ms=heartbeat_ms)
    server = svc.WorkerServer(config, start=True)
    bound = int(server._address.rsplit(":", 1)[1])  # noqa: SLF001 - the bound port
    return Worker(server, f"{host}:{bound}", loaded)


def serve_forever(server: Dispatcher | Worker) -> None:
    """Block until SIGTERM or SIGINT, then stop the server (main thread only)."""
    stop = threading.Event()

    def handle(signum: int, _frame: Any) -> None:
        log.info("tfpipe.service: signal %d, stopping", signum)
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        server.stop()


__all__ = ["Dispatcher", "LOOPBACK", "Worker", "serve_forever", "start_dispatcher",
           "start_worker"]
