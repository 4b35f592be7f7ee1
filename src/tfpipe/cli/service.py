"""`tfpipe service dispatcher|worker`: TensorFlow's tf.data service servers."""

from __future__ import annotations

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def command() -> None:
    """Start a tf.data service dispatcher or worker (runs until SIGTERM / Ctrl-C).

    No authentication: TF's servers listen on every interface; run them only
    inside a private network or behind a firewall (docs/scale.md).
    """


@command.command()
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="Port to listen on (0: a free one, printed).")
@click.option("--work-dir", default=None, metavar="DIR",
              help="Journal directory: fault-tolerant mode (a restart resumes its jobs).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address reported to clients (TF binds every interface regardless).")
@click.option("--worker-timeout-ms", type=click.IntRange(min=100), default=10_000,
              show_default=True, help="Log a worker as lost after this long without a "
              "heartbeat (TF keeps its tasks: clients bound the wait with "
              "service_timeout_s).")
@click.option("--job-gc-timeout-ms", type=click.IntRange(min=1000), default=None,
              help="Drop a job no client has read for this long (TF default 5 min).")
def dispatcher(port: int, work_dir: str | None, host: str, worker_timeout_ms: int,
               job_gc_timeout_ms: int | None) -> None:
    """Start a dispatcher."""
    from tfpipe.service import serve_forever, start_dispatcher

    d = start_dispatcher(port, work_dir, host=host, worker_timeout_ms=worker_timeout_ms,
                         job_gc_timeout_ms=job_gc_timeout_ms)
    click.echo(f"tfpipe service dispatcher: {d.target}"
               + (f" (fault-tolerant, journal in {work_dir})" if work_dir else ""), err=True)
    serve_forever(d)


@command.command()
@click.option("--dispatcher", "dispatcher_address", required=True, metavar="HOST:PORT",
              help="The dispatcher's address.")
@click.option("--port", type=click.IntRange(0, 65535), required=True,
              help="Port to listen on (0: a free one, printed).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address advertised to the dispatcher and clients.")
@click.option("--heartbeat-ms", type=click.IntRange(min=100), default=1000, show_default=True,
              help="Heartbeat to the dispatcher this often (new tasks arrive with it).")
def worker(dispatcher_address: str, port: int, host: str, heartbeat_ms: int) -> None:
    """Start a worker (loads tfpipe's native kernels first)."""
    from tfpipe.service import serve_forever, start_worker

    try:
        w = start_worker(dispatcher_address, port, host=host, heartbeat_ms=heartbeat_ms)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from exc
    click.echo(f"tfpipe service worker: {w.address} -> {dispatcher_address} (native kernels "
               f"{'loaded' if w.native else 'NOT loaded: pure-TF graphs only'})", err=True)
    serve_forever(w)
