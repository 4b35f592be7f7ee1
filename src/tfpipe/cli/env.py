"""`tfpipe env`: TensorFlow build, devices, XLA, CPUs and RAM this process may use."""

from __future__ import annotations

import json

import click


def _shown(value: object) -> str:
    if value is True or value is False:
        return "on" if value else "off"
    return "unset" if value is None else str(value)


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / (1 << 30):.1f} GiB"


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def command(as_json: bool) -> None:
    """Show the TensorFlow build (CUDA/cuDNN/ROCm), devices, XLA, CPUs and RAM, and
    tfpipe's environment switches (TFPIPE_*: value, set or default)."""
    from tfpipe.envinfo import collect

    info = collect()
    if as_json:
        click.echo(json.dumps(info, indent=2, sort_keys=True, default=str))
        return
    from tfpipe.cli._console import Rows, console, table

    t = Rows()
    t.add_row("tfpipe", info["tfpipe_version"])
    t.add_row("python", f"{info['python']} ({info['platform']})")
    cpus = info["cpus"]
    t.add_row("CPUs", f"{cpus['available']} available to this process "
                      f"(os.cpu_count: {cpus['os_cpu_count']})")
    mem = info["memory_bytes"]
    t.add_row("RAM", f"{_gib(mem['available'])} this process may use "
                     f"(host total: {_gib(mem.get('host_total'))})")
    tf_info = info["tensorflow"]
    if not tf_info["installed"]:
        t.add_row("TensorFlow", f"not installed: {tf_info['error']}")
    else:
        t.add_row("TensorFlow", f"{tf_info['version']} ({tf_info['git_version']})")
        build = tf_info["build"]
        cuda = (f"CUDA {build.get('cuda_version')}, cuDNN {build.get('cudnn_version')}"
                if build.get("is_cuda_build") else "no CUDA")
        rocm = f", ROCm {build.get('rocm_version')}" if build.get("is_rocm_build") else ""
        t.add_row("build", cuda + rocm)
        t.add_row("devices", ", ".join(f"{d['name']}" for d in tf_info["devices"]) or "none")
        xla = tf_info["xla"]
        t.add_row("XLA", "available" if xla["available"] else f"unavailable ({xla['detail']})")
        nat = tf_info.get("native_ops", {})
        t.add_row("native ops", f"{nat.get('path')} ({nat.get('reason')})" if nat.get("active")
                  else f"pure-TF fallback: {nat.get('reason') or nat.get('detail')}")
        t.add_row("TF threads", f"inter-op {tf_info['inter_op_threads'] or 'auto'}, "
                                f"intra-op {tf_info['intra_op_threads'] or 'auto'}")
    for name, sw in info["switches"].items():
        value = (f"INVALID: {sw['error']}" if "error" in sw else
                 f"{_shown(sw['value'])}" + (f" (set: {sw['raw']!r})" if sw["set"] else
                                             " (default)"))
        t.add_row(name, value)
    console().print(table("tfpipe env", ["key", "value"], t.rows, show_header=False,
                          styles={"key": "bold"}))
