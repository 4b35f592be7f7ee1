"""Read a `tf.data.Dataset` as data: its serialized GraphDef and function library.

Every `tf.data.Dataset` can be serialized to a GraphDef whose nodes are the
dataset ops (`MapDataset`, `ShuffleDatasetV3`, ...) and whose function library
holds the traced user functions. Doctor's rules read only this, so they work
for any pipeline, not only tfpipe's, and never run the pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, function_pb2, graph_pb2, types_pb2

# tf.data's AUTOTUNE sentinel as it appears in Const inputs.
AUTOTUNE = -1

_DT_STRING = types_pb2.DT_STRING


def _strip(input_name: str) -> str:
    """`node:1` / `^node` -> `node`."""
    return input_name.lstrip("^").split(":")[0]


def _decode_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def const_value(tensor_proto: Any) -> np.ndarray | list[bytes] | None:
    """Value of a Const's TensorProto; strings come back as a list of bytes.

    `tf.make_ndarray` cannot read string tensors packed into `tensor_content`
    (varint lengths, then the bytes), which is how `list_files` results are
    serialized, so strings are decoded here.
    """
    if tensor_proto.dtype == _DT_STRING:
        if tensor_proto.string_val:
            return list(tensor_proto.string_val)
        content = tensor_proto.tensor_content
        count = int(np.prod([d.size for d in tensor_proto.tensor_shape.dim]))
        if not content:
            return [] if count == 0 else None
        lengths, pos = [], 0
        try:
            for _ in range(count):
                length, pos = _decode_varint(content, pos)
                lengths.append(length)
            values = []
            for length in lengths:
                values.append(bytes(content[pos:pos + length]))
                pos += length
            return values
        except IndexError:
            return None
    try:
        return tf.make_ndarray(tensor_proto)
    except Exception:  # resource/variant handles and other non-value Consts
        return None


def const_len(tensor_proto: Any) -> int | None:
    """Number of elements along the first axis of a Const (None for scalars)."""
    dims = tensor_proto.tensor_shape.dim
    if not dims:
        return None
    return int(dims[0].size)


@dataclass
class DatasetNode:
    """One dataset op of the pipeline graph."""

    name: str
    op: str
    node_def: Any
    inputs: list[str] = field(default_factory=list)       # upstream dataset node names
    args: dict[str, list[str]] = field(default_factory=dict)  # op input arg -> node names
    functions: list[tuple[str, str]] = field(default_factory=list)  # (attr, function name)

    @property
    def label(self) -> str:
        return f"{self.op} '{self.name}'"

    def attr_s(self, key: str) -> str | None:
        if key in self.node_def.attr:
            return self.node_def.attr[key].s.decode()
        return None

    def attr_b(self, key: str) -> bool | None:
        if key in self.node_def.attr:
            return bool(self.node_def.attr[key].b)
        return None

    @property
    def main_function(self) -> str | None:
        return self.functions[0][1] if self.functions else None


def _function_attrs(node_def: Any) -> list[tuple[str, str]]:
    found = []
    for key in sorted(node_def.attr):
        value: attr_value_pb2.AttrValue = node_def.attr[key]
        kind = value.WhichOneof("value")
        if kind == "func":
            found.append((key, value.func.name))
        elif kind == "list" and value.list.func:
            found.extend((key, f.name) for f in value.list.func)
    # `f` (map/interleave/flat_map) or `predicate` (filter) first: the user's function.
    found.sort(key=lambda kv: (kv[0] not in ("f", "predicate"), kv[0]))
    return found


def _op_def(op: str) -> Any:
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)


def is_stateful_op(op: str) -> bool:
    """Whether TF registers `op` as stateful (what blocks tf.data's auto-parallelization)."""
    op_def = _op_def(op)
    return bool(op_def is not None and op_def.is_stateful)


def _arg_names(node_def: Any) -> dict[str, list[str]]:
    """Map the op's declared input args to the input node names that feed them."""
    data_inputs = [i for i in node_def.input if not i.startswith("^")]
    op_def = _op_def(node_def.op)
    if op_def is None:
        return {}
    args: dict[str, list[str]] = {}
    pos = 0
    for arg in op_def.input_arg:
        count = 1
        if arg.number_attr:
            count = node_def.attr[arg.number_attr].i
        elif arg.type_list_attr:
            count = len(node_def.attr[arg.type_list_attr].list.type)
        args[arg.name] = [_strip(i) for i in data_inputs[pos:pos + count]]
        pos += count
    return args


def _is_dataset_node(node_def: Any) -> bool:
    attrs = node_def.attr
    return ("output_shapes" in attrs) and ("output_types" in attrs or "Toutput_types" in attrs)


# Names tf.data gives the functions it traces: "__inference_Dataset_map_my_fn_123".
_TRANSFORMS = (
    "map_with_legacy_function", "filter_with_legacy_function", "flat_map", "map", "filter",
    "interleave", "parallel_interleave", "scan", "reduce", "group_by_window", "group_by_reducer",
    "take_while", "map_and_batch", "from_generator", "snapshot", "choose_from_datasets",
    "uncompress", "rejection_resample", "bucket_by_sequence_length",
)
_PREFIX = re.compile(
    r"^(?:Dataset|tf_data_experimental|tf_data|DataServiceDataset)_(?:"
    + "|".join(sorted(_TRANSFORMS, key=len, reverse=True))
    + r")_"
)


# Functions tf.data itself writes (TFRecordDataset's per-file reader, from_generator).
_TF_INTERNAL = frozenset({
    "read_one_file", "flat_map_fn", "get_iterator_id_fn", "generator_next_fn", "finalize_fn",
    "generator_py_func", "_apply_fn", "_get_dataset",
})


def function_display_name(library_name: str) -> str | None:
    """The user's Python name of a traced function, or None for TF-internal bodies.

    `__inference_Dataset_map_my_fn_123` -> `my_fn`; `__inference_helper_45` (a
    `tf.function` called from a map fn) -> `helper`; `cond_true_51` -> None.
    """
    if not library_name.startswith("__inference_"):
        return None
    name = library_name[len("__inference_"):]
    name = re.sub(r"_\d+$", "", name)
    name = _PREFIX.sub("", name)
    if name.startswith("class"):
        # A callable instance: tf.data names it after str(type(obj)) = "<class 'mod.Cls'>".
        cls = name[len("class"):].rsplit(".", 1)[-1]
        return None if cls in ("ABCMeta", "type", "") else cls
    return None if not name or name in _TF_INTERNAL else name


@dataclass(frozen=True)
class FunctionOp:
    """An op found inside a (possibly nested) function body."""

    op: str
    node: str               # node name inside its function, includes name scopes
    function: str           # library name of the function that holds the node
    call_path: tuple[str, ...]  # user-visible function names, outermost first
    node_def: Any = field(default=None, compare=False, repr=False)


class PipelineGraph:
    """The dataset ops of one pipeline plus the function library, ready to query."""

    def __init__(self, graph_def: graph_pb2.GraphDef) -> None:
        self.graph_def = graph_def
        self.library: dict[str, function_pb2.FunctionDef] = {
            f.signature.name: f for f in graph_def.library.function
        }
        self.all_nodes = {n.name: n for n in graph_def.node}
        self.nodes: dict[str, DatasetNode] = {}
        for n in graph_def.node:
            if not _is_dataset_node(n):
                continue
            args = _arg_names(n)
            node = DatasetNode(name=n.name, op=n.op, node_def=n, args=args,
                               functions=_function_attrs(n))
            self.nodes[n.name] = node
        for node in self.nodes.values():
            node.inputs = [
                _strip(i) for i in node.node_def.input
                if not i.startswith("^") and _strip(i) in self.nodes
            ]
        self.consumers: dict[str, list[str]] = {name: [] for name in self.nodes}
        for node in self.nodes.values():
            for i in node.inputs:
                self.consumers[i].append(node.name)
        retvals = [n for n in graph_def.node if n.op == "_Retval"]
        self.output: str | None = None
        if retvals:
            self.output = self._resolve(_strip(retvals[0].input[0]))

    @classmethod
    def from_dataset(cls, dataset: tf.data.Dataset) -> PipelineGraph:
        serialized = dataset._as_serialized_graph(  # noqa: SLF001 - the only public-ish way
            external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE
        )
        graph_def = graph_pb2.GraphDef()
        graph_def.ParseFromString(serialized.numpy())
        return cls(graph_def)

    def _resolve(self, name: str) -> str | None:
        seen = set()
        while name not in self.nodes and name in self.all_nodes and name not in seen:
            seen.add(name)
            inputs = [i for i in self.all_nodes[name].input if not i.startswith("^")]
            if not inputs:
                return None
            name = _strip(inputs[0])
        return name if name in self.nodes else None

    # ---- structure ---------------------------------------------------------------
    @cached_property
    def chain(self) -> list[DatasetNode]:
        """The main spine, source first: follow each op's first dataset input from the output."""
        spine: list[DatasetNode] = []
        name = self.output
        seen: set[str] = set()
        while name is not None and name not in seen:
            seen.add(name)
            node = self.nodes[name]
            spine.append(node)
            name = node.inputs[0] if node.inputs else None
        return spine[::-1]

    def upstream(self, name: str, stop: frozenset[str] = frozenset()) -> Iterator[DatasetNode]:
        """Every dataset node feeding `name` (all branches); `stop` ops are not crossed."""
        stack = list(self.nodes[name].inputs)
        seen: set[str] = set()
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            node = self.nodes[current]
            yield node
            if node.op not in stop:
                stack.extend(node.inputs)

    def downstream(self, name: str, stop: frozenset[str] = frozenset()) -> Iterator[DatasetNode]:
        """Dataset nodes fed by `name`, nearest first (breadth first)."""
        queue = list(self.consumers.get(name, []))
        seen: set[str] = set()
        while queue:
            current = queue.pop(0)
            if current in seen:
                continue
            seen.add(current)
            node = self.nodes[current]
            yield node
            if node.op not in stop:
                queue.extend(self.consumers.get(current, []))

    # ---- values -------------------------------------------------------------------
    def const(self, node: DatasetNode, arg: str) -> Any:
        """The constant fed to input arg `arg` of `node`, or None when not a Const."""
        names = node.args.get(arg)
        if not names:
            return None
        proto = self._const_proto(names[0])
        return None if proto is None else const_value(proto)

    def const_int(self, node: DatasetNode, arg: str) -> int | None:
        value = self.const(node, arg)
        if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "iu":
            return int(value.reshape(()))
        if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind == "b":
            return int(bool(value.reshape(())))
        return None

    def const_len(self, node: DatasetNode, arg: str) -> int | None:
        names = node.args.get(arg)
        if not names:
            return None
        proto = self._const_proto(names[0])
        return None if proto is None else const_len(proto)

    def _const_proto(self, name: str) -> Any:
        seen = set()
        while name in self.all_nodes and name not in seen:
            seen.add(name)
            n = self.all_nodes[name]
            if n.op == "Const":
                return n.attr["value"].tensor
            if n.op != "Identity":
                return None
            name = _strip(n.input[0])
        return None

    # ---- functions ------------------------------------------------------------------
    def function_ops(self, library_name: str) -> list[FunctionOp]:
        """Every op in a function and in every function it reaches (calls, branches, loops)."""
        out: list[FunctionOp] = []
        top = function_display_name(library_name)
        self._walk(library_name, (top,) if top else (), out, set())
        return out

    def _walk(self, fname: str, path: tuple[str, ...], out: list[FunctionOp],
              seen: set[str]) -> None:
        if fname in seen or fname not in self.library:
            return
        seen = seen | {fname}
        for nd in self.library[fname].node_def:
            out.append(FunctionOp(op=nd.op, node=nd.name, function=fname, call_path=path,
                                  node_def=nd))
            callees = [f for _, f in _function_attrs(nd)]
            if nd.op in self.library:  # a function called by name
                callees.append(nd.op)
            for callee in callees:
                shown = function_display_name(callee)
                self._walk(callee, path + (shown,) if shown else path, out, seen)

    # ---- sizes ------------------------------------------------------------------------
    def element_bytes(self, node: DatasetNode) -> int | None:
        """Bytes of one element of `node`'s output, or None when shapes/dtypes vary."""
        attrs = node.node_def.attr
        types_key = "output_types" if "output_types" in attrs else "Toutput_types"
        dtypes = list(attrs[types_key].list.type)
        shapes = list(attrs["output_shapes"].list.shape)
        total = 0
        for dtype_enum, shape in zip(dtypes, shapes):
            dtype = tf.dtypes.as_dtype(dtype_enum)
            if dtype in (tf.string, tf.variant, tf.resource) or shape.unknown_rank:
                return None
            dims = [d.size for d in shape.dim]
            if any(d < 0 for d in dims):
                return None
            total += int(np.prod(dims, dtype=np.int64)) * dtype.size
        return total

    def cardinality(self, node: DatasetNode) -> int | None:
        """Element count of the dataset that `node` outputs (tf.data's own estimate).

        Rebuilds the sub-pipeline ending at `node` from the GraphDef, so the count
        is tf.data's (-1 infinite, -2 unknown), not a re-implementation.
        """
        graph_def = graph_pb2.GraphDef()
        graph_def.CopyFrom(self.graph_def)
        retvals = [n for n in graph_def.node if n.op == "_Retval"]
        if not retvals:
            return None
        retvals[0].input[0] = node.name
        try:
            variant = tf.raw_ops.DatasetFromGraph(graph_def=graph_def.SerializeToString())
            return int(tf.raw_ops.DatasetCardinality(input_dataset=variant).numpy())
        except Exception:  # an op that cannot be rebuilt outside its program
            return None
