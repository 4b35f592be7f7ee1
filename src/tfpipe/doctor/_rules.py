"""The doctor rules: one small function each, registered with id, severity and title.

Rule ids are stable: users silence them by id (`check(..., ignore=[...])`,
`tfpipe doctor --ignore ID`). docs/doctor.md documents each one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tfpipe.doctor import _ops as O
from tfpipe.doctor._core import Context, Finding, rule
from tfpipe.doctor._graph import AUTOTUNE, DatasetNode, FunctionOp, function_display_name

# A shuffle buffer should hold at least this many batches: with fewer, consecutive
# batches are drawn from nearly the same window of the (usually class-sorted or
# file-ordered) input, so batches are far from i.i.d.
SHUFFLE_BATCHES = 10
# Explicit parallelism above this multiple of the usable CPUs only adds context
# switches and memory: tf.data runs map/interleave calls on its runner pool,
# which is sized from the CPUs anyway; AUTOTUNE never goes past that pool.
OVERSUBSCRIBE_FACTOR = 4
# A sequential map is "non-trivial" above this many ops that do work.
SEQUENTIAL_MAP_OPS = 10

# tf.image.random_* (scope name in the graph) -> (stateless TF op, tfpipe equivalent)
_TF_IMAGE_EQUIV = {
    "random_brightness": ("tf.image.stateless_random_brightness",
                          "tfpipe.augment.color.random_brightness / config augment.pixel.brightness"),
    "random_contrast": ("tf.image.stateless_random_contrast",
                        "tfpipe.augment.color.random_contrast / config augment.pixel.contrast"),
    "random_saturation": ("tf.image.stateless_random_saturation",
                          "tfpipe.augment.color.random_saturation / config augment.pixel.saturation"),
    "random_hue": ("tf.image.stateless_random_hue",
                   "tfpipe.augment.color.random_hue / config augment.pixel.hue"),
    "random_flip_left_right": ("tf.image.stateless_random_flip_left_right",
                               "tfpipe.augment.random_flip / config augment.geometry.flip"),
    "random_flip_up_down": ("tf.image.stateless_random_flip_up_down",
                            "tfpipe.augment.random_flip / config augment.geometry.flip"),
    "random_crop": ("tf.image.stateless_random_crop",
                    "tfpipe.augment.random_resized_crop / config augment.geometry.random_resized_crop"),
    "random_jpeg_quality": ("tf.image.stateless_random_jpeg_quality",
                            "config augment.pixel.jpeg_quality"),
    "sample_distorted_bounding_box": ("tf.image.stateless_sample_distorted_bounding_box",
                                      "tfpipe.augment.random_resized_crop"),
}


# ---- helpers ---------------------------------------------------------------------------
def _user_functions(ctx: Context) -> Iterator[tuple[DatasetNode, str, str | None]]:
    """(dataset node, library function, user name) for every function a dataset op runs."""
    for node in ctx.graph.nodes.values():
        for _, fname in node.functions:
            yield node, fname, function_display_name(fname)


def _ops(ctx: Context, fname: str) -> list[FunctionOp]:
    # from_generator's machinery is reported by python-source, not as a map.
    return [o for o in ctx.function_ops(fname) if "Dataset_from_generator_" not in o.function]


def _by_path(ops: list[FunctionOp]) -> dict[tuple[str, ...], list[FunctionOp]]:
    grouped: dict[tuple[str, ...], list[FunctionOp]] = {}
    for o in ops:
        grouped.setdefault(o.call_path, []).append(o)
    return grouped


def _where(function: str | None, path: tuple[str, ...]) -> str:
    if len(path) > 1:
        return f"in {path[-1]} (called from {' -> '.join(path[:-1])})"
    if function:
        return f"in {function}"
    return "in a function"


def _node_has_random(ctx: Context, node: DatasetNode, *, stateful_only: bool = False) -> bool:
    for _, fname in node.functions:
        for o in _ops(ctx, fname):
            # o.function: the (possibly nested) library function holding the op
            if (o.op in O.STATEFUL_RANDOM_OPS) if stateful_only else O.draws_random(
                    o.op, o.function):
                return True
    return False


def _parallel_calls(ctx: Context, node: DatasetNode) -> int | None:
    return ctx.graph.const_int(node, "num_parallel_calls")


def _deterministic(ctx: Context, node: DatasetNode) -> tuple[bool, bool]:
    """(effective deterministic ordering, whether the user set it explicitly)."""
    attr = node.attr_s("deterministic")
    if attr in ("true", "false"):
        return attr == "true", True
    opt = ctx.options.deterministic
    if opt is not None:
        return bool(opt), True
    return True, False


def _is_memory_cache(ctx: Context, node: DatasetNode) -> bool:
    # cache() and cache("") keep elements in memory; any other name is a file prefix.
    return ctx.graph.const(node, "filename") == [b""]


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


# ---- rules ----------------------------------------------------------------------------
@rule("python-in-map", "error", "Python (py_function / numpy_function) inside a tf.data function")
def python_in_map(ctx: Context) -> Iterator[Finding]:
    for node, fname, user in _user_functions(ctx):
        for path, ops in _by_path([o for o in _ops(ctx, fname)
                                   if o.op in O.PY_FUNC_OPS]).items():
            kinds = sorted({o.op for o in ops})
            yield ctx.finding(
                "python-in-map", node,
                f"{'/'.join(kinds)} (tf.py_function / tf.numpy_function) {_where(user, path)}: "
                "every element goes through the Python interpreter under the GIL, so "
                "num_parallel_calls buys almost nothing, the pipeline cannot be serialized "
                "(tf.data service, SavedModel) and the op is opaque to tf.data's optimizer.",
                "Rewrite it with TensorFlow ops. Image augmentation has graph-only, stateless "
                "equivalents in tfpipe.augment (e.g. tfpipe.augment.color.random_brightness, "
                "tfpipe.augment.random_resized_crop); work that truly needs Python belongs "
                "offline (`tfpipe convert` / `tfpipe materialize`).",
                function=user, call_path=path)


@rule("python-source", "warning", "Python generator as the data source")
def python_source(ctx: Context) -> Iterator[Finding]:
    for node, fname, _ in _user_functions(ctx):
        if any(o.op == "GeneratorDataset" for o in ctx.function_ops(fname)):
            yield ctx.finding(
                "python-source", node,
                "Dataset.from_generator: every element is produced by Python in one thread "
                "under the GIL; the rest of the pipeline waits on it and it cannot run on "
                "tf.data service workers.",
                "Convert the data once to sharded TFRecords (`tfpipe convert`) and read them "
                "with tfpipe.build_pipeline or interleave(TFRecordDataset).")


def _random_hint(ops: list[FunctionOp], api: str | None = None) -> tuple[str, str]:
    """(tf.image function behind `ops`, its stateless replacement) from the called API
    (call site) or, for a graph read without sources, from the ops' name scopes."""
    names = [api.rsplit(".", 1)[-1]] if api else []
    names += [scope for o in ops for scope in o.node.split("/")]
    for name in names:
        if name in _TF_IMAGE_EQUIV:
            return name, "use {} with a per-element seed, or {} (stateless, graph-only)".format(
                *_TF_IMAGE_EQUIV[name])
    return "", ""


def _calls(ctx: Context, ops: list[FunctionOp]) -> list[tuple[Any, list[FunctionOp]]]:
    """`ops` grouped by the call that created them, in graph order: by the user's source
    line when the op's traceback is known (`ctx.sites`), else by the op's outermost
    name scope in its function (tf.image.random_flip_left_right -> its scope; two
    tf.random.uniform calls -> random_uniform, random_uniform_1)."""
    groups: dict[tuple[str, ...], tuple[Any, list[FunctionOp]]] = {}
    for o in ops:
        site = ctx.sites.get((o.function, o.node))
        key = ("site", site.location) if site is not None else (
            "scope", o.function, o.node.split("/")[0])
        groups.setdefault(key, (site, []))[1].append(o)
    return list(groups.values())


@rule("stateful-random", "error", "Stateful random op inside a tf.data function")
def stateful_random(ctx: Context) -> Iterator[Finding]:
    """One finding per call (each `tf.image.random_*` / `tf.random.*` the function makes),
    located at that call's line."""
    for node, fname, user in _user_functions(ctx):
        found = [o for o in _ops(ctx, fname) if o.op in O.STATEFUL_RANDOM_OPS]
        for path, ops in _by_path(found).items():
            for site, call_ops in _calls(ctx, ops):
                kinds = ", ".join(sorted({o.op for o in call_ops}))
                scope, hint = _random_hint(call_ops, site.api if site else None)
                api = f"tf.image.{scope}" if scope else (site.api if site else None)
                origin = f" (from {api})" if api else ""
                # without a call site the graph node names the call (and keeps two
                # calls apart: random_uniform vs random_uniform_1)
                at = f" at {site.location}" if site else f" (graph node {call_ops[0].node})"
                yield ctx.finding(
                    "stateful-random", node,
                    f"stateful random op {kinds}{origin} {_where(user, path)}{at}: it draws "
                    "from one hidden state shared by all elements, so which element gets which "
                    "random number depends on thread timing under a parallel map, on prefetch "
                    "depth and on restarts; augmentation is not reproducible and cannot be "
                    "resumed mid-epoch.",
                    (hint + "; in general " if hint else "")
                    + "use tf.random.stateless_* / tf.image.stateless_* with a seed derived "
                    "from the element index (tfpipe.seeds.sample_seed(epoch_seed, index)); the "
                    "tfpipe.augment ops all take such a seed.",
                    function=user, call_path=path,
                    location=site.location if site else None)


_VARIABLE_WRITES = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})


@rule("stateful-random-seed", "error", "stateless random ops fed from a mutable seed variable")
def seed_variable(ctx: Context) -> Iterator[Finding]:
    """Keras 3 preprocessing layers (and keras.random.SeedGenerator) keep their seed in a
    variable that each call reads and bumps: stateless ops, stateful behaviour."""
    for node, fname, user in _user_functions(ctx):
        ops = _ops(ctx, fname)
        if any(o.op in O.STATEFUL_RANDOM_OPS for o in ops):
            continue  # stateful-random reports this function already
        kinds = {o.op for o in ops}
        if kinds & _VARIABLE_WRITES and any(O.is_stateless_random(k) for k in kinds):
            path = next(o.call_path for o in ops if O.is_stateless_random(o.op))
            yield ctx.finding(
                "stateful-random-seed", node,
                f"stateless random ops {_where(user, path)} take their seed from a variable "
                "that every call reads and advances (Keras preprocessing layers, "
                "keras.random.SeedGenerator): under a parallel map the elements race for "
                "the seed, so which element gets which draw depends on thread timing.",
                "Derive the seed from the element index instead (ds.enumerate(), "
                "tfpipe.seeds.sample_seed) and use tf.image.stateless_* or tfpipe.augment "
                "ops; keep Keras random layers in the model, where they run per batch.",
                function=user, call_path=path)


@rule("cache-after-random", "error", "cache() stores randomly augmented elements")
def cache_after_random(ctx: Context) -> Iterator[Finding]:
    for cache in ctx.graph.nodes.values():
        if cache.op not in O.CACHE_OPS:
            continue
        for up in ctx.graph.upstream(cache.name):
            if up.functions and _node_has_random(ctx, up):
                user = function_display_name(up.main_function or "")
                yield ctx.finding(
                    "cache-after-random", cache,
                    f"cache() is downstream of {up.label}, whose function "
                    f"{user or ''} draws random numbers: the first epoch's random augmentation "
                    "is stored and every later epoch replays exactly the same augmented "
                    "elements (stateless ops with a per-element seed included), so the model "
                    "sees no new augmentation after epoch 1.",
                    "Move cache() before the random map (cache decoded or encoded data, augment "
                    "after it); tfpipe's pipeline caches records before shuffle/augmentation "
                    "(pipeline.cache).",
                    function=user)
            elif up.op in O.SHUFFLE_OPS and up.attr_b("reshuffle_each_iteration"):
                yield ctx.finding(
                    "cache-after-random", cache,
                    f"cache() is downstream of {up.label} (reshuffle_each_iteration=True): the "
                    "cache stores the first epoch's order and replays it, so the shuffle "
                    "never reshuffles.",
                    "Put cache() before shuffle().")


@rule("shuffle-after-batch", "warning", "shuffle() after batch() shuffles whole batches")
def shuffle_after_batch(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op not in O.SHUFFLE_OPS:
            continue
        for up in ctx.graph.upstream(node.name, stop=O.UNBATCH_OPS):
            if up.op in O.BATCH_OPS:
                yield ctx.finding(
                    "shuffle-after-batch", node,
                    f"shuffle() is downstream of {up.label}: it reorders whole batches, so "
                    "the same elements always travel together in the same batch every epoch.",
                    "Shuffle elements before batch(): ds.shuffle(n).batch(b) "
                    "(tfpipe.build_pipeline does this).")
                break


def _batch_size_after(ctx: Context, node: DatasetNode) -> int | None:
    for down in ctx.graph.downstream(node.name, stop=O.UNBATCH_OPS):
        if down.op in O.UNBATCH_OPS:
            break
        if down.op in O.BATCH_OPS:
            size = ctx.graph.const_int(down, "batch_size")
            if size is not None:
                return size
    return ctx.batch_size_hint


@rule("small-shuffle-buffer", "warning",
      f"shuffle buffer smaller than {SHUFFLE_BATCHES}x the batch size")
def small_shuffle_buffer(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op not in O.SHUFFLE_OPS:
            continue
        buffer = ctx.graph.const_int(node, "buffer_size")
        if buffer is None or buffer < 0:
            continue
        batch = _batch_size_after(ctx, node)
        if buffer > 1 and (batch is None or buffer >= SHUFFLE_BATCHES * batch):
            continue
        # A buffer that holds the whole input is a perfect shuffle, whatever its size
        # (list_files over one file shuffles with buffer 1).
        upstream = node.inputs[0] if node.inputs else None
        total = ctx.graph.cardinality(ctx.graph.nodes[upstream]) if upstream else None
        if total is not None and 0 <= total <= buffer:
            continue
        if buffer <= 1:
            yield ctx.finding(
                "small-shuffle-buffer", node,
                f"shuffle(buffer_size={buffer}) does not shuffle at all: the output order is "
                "the input order.",
                f"Use a buffer of at least {SHUFFLE_BATCHES}x the batch size "
                "(config pipeline.shuffle_buffer), or remove the shuffle.")
            continue
        yield ctx.finding(
            "small-shuffle-buffer", node,
            f"shuffle buffer {buffer} is {buffer / batch:.1f}x the batch size {batch} "
            f"(< {SHUFFLE_BATCHES}x): each batch is drawn from a window of about "
            f"{buffer / batch:.1f} batches of the input order, so files or classes stored "
            "together stay together and batches are far from i.i.d.",
            f"Raise the buffer to >= {SHUFFLE_BATCHES * batch} ({SHUFFLE_BATCHES}x the batch), "
            "and shuffle the file order too (interleave over shuffled shards, as "
            "tfpipe.build_pipeline does); config: pipeline.shuffle_buffer.")


@rule("prefetch-not-last", "warning", "no prefetch() at the end of the pipeline")
def prefetch_not_last(ctx: Context) -> Iterator[Finding]:
    chain = ctx.graph.chain
    if not chain or any("Prefetch" in name for name in ctx.unreadable):
        return  # prefetch_to_device ends the pipeline (unserializable, so not in the graph)
    tail = [n for n in reversed(chain)]
    working = [n for n in tail if n.op not in O.FREE_TAIL_OPS]
    if not working or working[0].op in O.PREFETCH_OPS:
        return
    fix = ("End the pipeline with .prefetch(tf.data.AUTOTUNE) after every transformation "
           "(tfpipe.build_pipeline always does); tf.data's inject_prefetch rewrite only helps "
           "when autotune and default optimizations are on, and is invisible and untunable.")
    if not any(n.op in O.PREFETCH_OPS for n in chain):
        yield ctx.finding(
            "prefetch-not-last", chain[-1],
            "the pipeline has no prefetch(): producing the next batch does not overlap with "
            "the training step consuming the current one, so every step waits for the input.",
            fix)
        return
    after = []
    for n in tail:
        if n.op in O.PREFETCH_OPS:
            break
        if n.op not in O.FREE_TAIL_OPS:
            after.append(n)
    names = ", ".join(n.label for n in reversed(after))
    yield ctx.finding(
        "prefetch-not-last", after[0],
        f"{names} run after the last prefetch(): their work happens synchronously on the "
        "training step's thread instead of in the background.",
        fix, function=function_display_name(after[0].main_function or ""))


def _work(ops: list[FunctionOp]) -> tuple[int, list[str]]:
    work = [o for o in ops if o.op not in O.TRIVIAL_OPS]
    heavy = sorted({o.op for o in work if o.op in O.HEAVY_OPS})
    return len(work), heavy


@rule("sequential-map", "warning", "non-trivial map() without num_parallel_calls")
def sequential_map(ctx: Context) -> Iterator[Finding]:
    from tfpipe.doctor._graph import is_stateful_op

    opt = ctx.options.experimental_optimization
    rewrite_on = (ctx.options.autotune.enabled is not False
                  and opt.apply_default_optimizations is not False
                  and opt.map_parallelization is not False)
    for node in ctx.graph.nodes.values():
        if node.op != "MapDataset" or not node.main_function:
            continue
        ops = ctx.function_ops(node.main_function)
        count, heavy = _work(ops)
        if count <= SEQUENTIAL_MAP_OPS and not heavy:
            continue
        user = function_display_name(node.main_function)
        stateful = sorted({o.op for o in ops if o.op != "Assert" and is_stateful_op(o.op)})
        auto = rewrite_on and not stateful and not node.attr_b("force_synchronous")
        what = f"{count} ops" + (f" incl. {', '.join(heavy[:4])}" if heavy else "")
        if auto:
            yield ctx.finding(
                "sequential-map", node,
                f"map({user or 'fn'}) ({what}) has no num_parallel_calls; tf.data's "
                "map_parallelization rewrite will parallelize it (stateless function, autotune "
                "on), but only as long as those defaults hold.",
                "Say it explicitly: .map(fn, num_parallel_calls=tf.data.AUTOTUNE) "
                "(config pipeline.num_parallel_calls).",
                function=user, severity="info")
            continue
        why = (f"it is stateful ({', '.join(stateful[:3])}), so tf.data's map_parallelization "
               "cannot rewrite it" if stateful else
               "map_parallelization/autotune are disabled in Options")
        yield ctx.finding(
            "sequential-map", node,
            f"map({user or 'fn'}) ({what}) runs one element at a time on one core: {why}.",
            "Pass num_parallel_calls=tf.data.AUTOTUNE (or a fixed count near the CPUs) "
            "and make the function stateless (tf.random.stateless_*, tfpipe.augment); "
            "config: pipeline.num_parallel_calls.",
            function=user)


def _file_count(ctx: Context, node: DatasetNode | None) -> int | None:
    """Length of the file-name list that `node` (a dataset of file names) came from."""
    current = node
    for _ in range(64):
        if current is None:
            return None
        if current.op == "TensorSliceDataset":
            return ctx.graph.const_len(current, "components")
        if current.op == "TensorDataset":
            return 1
        current = ctx.graph.nodes[current.inputs[0]] if current.inputs else None
    return None


def _reads_files(ctx: Context, node: DatasetNode) -> str | None:
    if not node.main_function:
        return None
    for o in ctx.function_ops(node.main_function):
        if o.op in O.FILE_READER_OPS:
            return o.op
    return None


@rule("no-interleave", "warning", "files read one after another")
def no_interleave(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        reader = None
        sequential = False
        if node.op in O.FILE_READER_OPS:
            reader, sequential = node.op, True
            files = ctx.graph.const_len(node, "filenames") or 1
        elif node.op in {"FlatMapDataset"} | O.INTERLEAVE_OPS | O.PARALLEL_INTERLEAVE_OPS:
            reader = _reads_files(ctx, node)
            if reader is None:
                continue
            files = _file_count(ctx, ctx.graph.nodes[node.inputs[0]] if node.inputs else None)
            cycle = ctx.graph.const_int(node, "cycle_length")
            if node.op in O.PARALLEL_INTERLEAVE_OPS:
                npc = ctx.graph.const_int(node, "num_parallel_calls")
                sequential = cycle == 1 or npc == 1
            elif node.op in O.INTERLEAVE_OPS and cycle is not None and cycle > 1:
                # files taken in turn on one thread: the order mixes files; for local,
                # page-cached small records this is faster than reader threads (the
                # tabular reader does it, docs/tabular.md), so it is a note, not a warning
                yield ctx.finding(
                    "no-interleave", node,
                    f"{reader} files are read {cycle} at a time in turn, on one thread.",
                    "Fine for local, small records; for remote storage or large records "
                    "read in parallel: interleave(..., num_parallel_calls=AUTOTUNE).",
                    function=function_display_name(node.main_function or ""),
                    severity="info")
                continue
            else:
                sequential = True
        if reader is None:
            continue
        user = function_display_name(node.main_function or "")
        if files == 1:
            yield ctx.finding(
                "no-interleave", node,
                f"{reader} reads a single file: one sequential reader feeds the whole "
                "pipeline, workers cannot split it and a shuffle never mixes beyond its buffer.",
                "Shard the data into many files (`tfpipe convert` writes shards of "
                "--shard-size) and read them with interleave(..., num_parallel_calls=AUTOTUNE).",
                function=user, severity="info")
        elif sequential:
            count = f"{files} files" if files else "several files"
            yield ctx.finding(
                "no-interleave", node,
                f"{reader} reads {count} one after another: reading and framing run on one "
                "thread, and the input order is file by file (a shuffle buffer only mixes "
                "neighbours).",
                "Read files in parallel: files.interleave(tf.data.TFRecordDataset, "
                "cycle_length=N, num_parallel_calls=tf.data.AUTOTUNE, deterministic=...) or "
                "TFRecordDataset(files, num_parallel_reads=AUTOTUNE); tfpipe.build_pipeline "
                "does this (config pipeline.interleave_cycle).", function=user)


@rule("repeat-before-shuffle", "info", "repeat() before shuffle() blurs epoch boundaries")
def repeat_before_shuffle(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op not in O.SHUFFLE_OPS or node.op in O.REPEAT_OPS:
            continue
        for up in ctx.graph.upstream(node.name):
            if up.op == "RepeatDataset":
                yield ctx.finding(
                    "repeat-before-shuffle", node,
                    f"shuffle() is downstream of {up.label}: the buffer mixes elements of "
                    "consecutive epochs, so an element can appear twice before another "
                    "appears once, and 'epoch' boundaries (eval, checkpoints) are fuzzy.",
                    "Shuffle first, then repeat: ds.shuffle(n).repeat() — or rebuild per epoch "
                    "(tfpipe.build_pipeline(config, epoch=e) reshuffles with the epoch seed).")
                break


@rule("unbounded-cache", "warning", "in-memory cache() that may not fit in RAM")
def unbounded_cache(ctx: Context) -> Iterator[Finding]:
    budget = ctx.ram_budget_bytes
    for node in ctx.graph.nodes.values():
        if node.op not in O.CACHE_OPS or not _is_memory_cache(ctx, node):
            continue
        fix = ("Cache to a file (cache('/fast/disk/path'); config pipeline.cache: <directory>), "
               "cache a smaller representation (encoded records instead of decoded images), "
               "or drop the cache.")
        repeats = [u for u in ctx.graph.upstream(node.name)
                   if u.op == "RepeatDataset" and ctx.graph.const_int(u, "count") == -1]
        upstream = ctx.graph.nodes[node.inputs[0]] if node.inputs else None
        total = ctx.graph.cardinality(upstream) if upstream else None
        if repeats or total == -1:
            yield ctx.finding(
                "unbounded-cache", node,
                "in-memory cache() of an infinite dataset (it follows repeat()): the cache never "
                "completes and grows until the process runs out of memory.",
                "Call cache() before repeat(). " + fix, severity="error")
            continue
        elem = ctx.graph.element_bytes(upstream) if upstream else None
        if total is not None and total >= 0 and elem is not None:
            size = total * elem
            if size > budget:
                yield ctx.finding(
                    "unbounded-cache", node,
                    f"in-memory cache() of {total} elements x {_fmt_bytes(elem)} = "
                    f"{_fmt_bytes(size)} exceeds the RAM budget {_fmt_bytes(budget)}.",
                    fix, severity="error" if size > 2 * budget else "warning")
        elif total is None or total < 0:
            yield ctx.finding(
                "unbounded-cache", node,
                "in-memory cache() of a dataset whose size tf.data cannot tell (unknown "
                "cardinality" + ("" if elem is not None else ", variable-size elements")
                + f"): nothing bounds it by the RAM budget {_fmt_bytes(budget)}.",
                fix + " If you know it fits, silence with --ignore unbounded-cache.",
                severity="info")


@rule("oversubscribed-threads", "warning", "more threads than the CPUs this process may use")
def oversubscribed_threads(ctx: Context) -> Iterator[Finding]:
    limit = OVERSUBSCRIBE_FACTOR * ctx.cpus
    why = (f"this process may use {ctx.cpus} CPU(s) (cgroup quota and affinity); more than "
           f"{OVERSUBSCRIBE_FACTOR}x that in flight only adds context switches, memory for "
           "in-flight elements and tail latency (tf.data runs the calls on its own runner "
           "pool, and AUTOTUNE would never go past it)")
    autotuned = False
    for node in ctx.graph.nodes.values():
        for arg in ("num_parallel_calls", "cycle_length", "num_threads"):
            value = ctx.graph.const_int(node, arg)
            if value == AUTOTUNE and arg == "num_parallel_calls":
                autotuned = True
            if value is not None and value > limit:
                yield ctx.finding(
                    "oversubscribed-threads", node,
                    f"{arg}={value} but {why}.",
                    "Use tf.data.AUTOTUNE, or at most a small multiple of "
                    "tfpipe.system.available_cpus() (tfpipe's pipeline derives it from there).",
                    function=function_display_name(node.main_function or ""))
        if node.op in O.PARALLEL_INTERLEAVE_OPS and ctx.graph.const_int(node, "cycle_length") == AUTOTUNE:
            autotuned = True
    pool = ctx.options.threading.private_threadpool_size
    if pool is not None and pool > limit:
        yield ctx.finding(
            "oversubscribed-threads", None,
            f"Options.threading.private_threadpool_size={pool} but {why}.",
            "Set private_threadpool_size to tfpipe.system.available_cpus().")
    if autotuned and not pool and ctx.cpus < ctx.host_cpus:
        yield ctx.finding(
            "oversubscribed-threads", None,
            f"AUTOTUNE parallelism without a private thread pool: TensorFlow sizes its pool "
            f"from the {ctx.host_cpus} cores it sees, but a CPU quota lets this process use "
            f"only {ctx.cpus}; AUTOTUNE then schedules up to {ctx.host_cpus} concurrent calls "
            "that the quota throttles.",
            "Set options.threading.private_threadpool_size = tfpipe.system.available_cpus() "
            "(tfpipe.build_pipeline does; config pipeline.private_threadpool).")


@rule("serial-determinism", "info", "deterministic ordering that buys nothing, or the reverse")
def serial_determinism(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op not in O.PARALLEL_MAP_OPS | O.PARALLEL_INTERLEAVE_OPS or not node.main_function:
            continue
        npc = ctx.graph.const_int(node, "num_parallel_calls")
        if npc == 1:
            continue
        user = function_display_name(node.main_function)
        if user is None:
            continue  # TF's own reader (TFRecordDataset(num_parallel_reads=...)) sets this
        deterministic, explicit = _deterministic(ctx, node)
        if deterministic and explicit and not _node_has_random(ctx, node):
            yield ctx.finding(
                "serial-determinism", node,
                f"deterministic=True on a parallel {node.op} whose function "
                f"{user or ''} draws no random numbers: one slow element holds back all the "
                "ones behind it (head-of-line blocking); worth it only if you need the exact "
                "element order (bit-reproducible batches, resume at a step).",
                "If order does not matter, pass deterministic=False (or "
                "Options.deterministic=False; config pipeline.deterministic: false).",
                function=user)
        elif not deterministic and explicit and _node_has_random(ctx, node, stateful_only=True):
            yield ctx.finding(
                "serial-determinism", node,
                f"deterministic=False together with stateful random ops in {user or 'fn'}: "
                "both the element order and which element gets which random draw vary "
                "from run to run.",
                "Use stateless random ops seeded by element index (tfpipe.seeds, "
                "tfpipe.augment); then deterministic=False only changes the order.",
                function=user, severity="warning")


@rule("unbatched-parse", "info", "parse_single_example per record instead of batched parse")
def unbatched_parse(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op not in O.MAP_OPS or not node.main_function:
            continue
        if any(u.op in O.BATCH_OPS for u in ctx.graph.upstream(node.name, stop=O.UNBATCH_OPS)):
            continue
        if not any(d.op in O.BATCH_OPS for d in ctx.graph.downstream(node.name)):
            continue
        ops = ctx.function_ops(node.main_function)
        if any(o.op in O.PARSE_OPS for o in ops):
            user = function_display_name(node.main_function)
            yield ctx.finding(
                "unbatched-parse", node,
                f"{user or 'the map function'} parses one serialized Example per call; "
                "tf.io.parse_example on a batch of records costs far less per record "
                "(one kernel launch and one allocation per batch).",
                "batch() the serialized records first and parse with tf.io.parse_example "
                "(then unbatch() if the rest is per element), when nothing per-record runs "
                "before parsing.",
                function=user)


_IGNORE_ERRORS_OPS = frozenset({"IgnoreErrorsDataset", "ExperimentalIgnoreErrorsDataset"})


def _ignore_errors_finding(ctx: Context, node: DatasetNode, log_warning: bool,
                           function: str | None = None) -> Finding:
    logged = ("it logs a warning, but" if log_warning else "it logs nothing by default and")
    return ctx.finding(
        "ignore-errors", node,
        "ignore_errors() over a TFRecord/text reader: a corrupt record is a DataLossError "
        f"that ends that file's reader, so every remaining record of the file is dropped; "
        f"{logged} ignore_errors() counts nothing of what was lost.",
        "Find and repair damage first: `tfpipe verify DATA --salvage` keeps every readable "
        "record; tfpipe.build_pipeline's pipeline.on_error policy reports what was skipped.",
        function=function, severity="info" if log_warning else "warning")


@rule("ignore-errors", "warning", "ignore_errors() on a file source")
def ignore_errors(ctx: Context) -> Iterator[Finding]:
    for node in ctx.graph.nodes.values():
        if node.op in _IGNORE_ERRORS_OPS:
            # Only readers whose errors can reach this op: not behind another
            # ignore_errors(), and not already absorbed inside their own per-file function.
            readers = [u for u in ctx.graph.upstream(node.name, stop=_IGNORE_ERRORS_OPS)
                       if u.op not in _IGNORE_ERRORS_OPS
                       and (u.op in O.FILE_READER_OPS
                            or (_reads_files(ctx, u) and not any(
                                o.op in _IGNORE_ERRORS_OPS
                                for o in ctx.function_ops(u.main_function or ""))))]
            if readers:
                yield _ignore_errors_finding(ctx, node, bool(node.attr_b("log_warning")))
            continue
        # interleave(lambda f: TFRecordDataset(f).ignore_errors()): the same, per file.
        for _, fname in node.functions:
            ops = ctx.function_ops(fname)
            if not any(o.op in O.FILE_READER_OPS for o in ops):
                continue
            if any(o.op in O.RESYNC_READER_OPS for o in ops):
                # tfpipe's tolerant reader: where ignore_errors() ends a shard's fast
                # reader, the frame walk reads every intact record after the damage
                # and counts what was lost (pipeline.read_records): nothing is dropped.
                continue
            for o in ops:
                if o.op in _IGNORE_ERRORS_OPS:
                    log = bool(o.node_def is not None and "log_warning" in o.node_def.attr
                               and o.node_def.attr["log_warning"].b)
                    yield _ignore_errors_finding(ctx, node, log, function_display_name(fname))


@rule("unserializable", "info", "part of the pipeline cannot be serialized")
def unserializable(ctx: Context) -> Iterator[Finding]:
    if ctx.unreadable:
        names = " <- ".join(ctx.unreadable)
        yield ctx.finding(
            "unserializable", None,
            f"tf.data cannot serialize the last transformation(s) ({names}); doctor checked "
            "the pipeline up to them. A pipeline that cannot be serialized cannot move to "
            "tf.data service workers or be checkpointed with its iterator.",
            "Nothing to do if they are last-step device transfers (prefetch_to_device); "
            "otherwise check the dataset before them.")
