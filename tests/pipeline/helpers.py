"""Shared helpers: collect elements by global index, read the dataset graph."""

from __future__ import annotations

import numpy as np
import tensorflow as tf


def by_index(ds: tf.data.Dataset) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Global sample index -> (image, label) over a keep_index pipeline."""
    out = {}
    for batch in ds:
        for i, idx in enumerate(batch["index"].numpy()):
            assert int(idx) not in out, f"index {idx} seen twice"
            out[int(idx)] = (batch["image"][i].numpy(), batch["label"][i].numpy())
    return out


def batches(ds: tf.data.Dataset) -> list[dict[str, np.ndarray]]:
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


def graph_def(ds: tf.data.Dataset) -> tf.compat.v1.GraphDef:
    policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    serialized = ds._as_serialized_graph(external_state_policy=policy)  # noqa: SLF001
    g = tf.compat.v1.GraphDef()
    g.ParseFromString(serialized.numpy())
    return g


def all_ops(g: tf.compat.v1.GraphDef) -> set[str]:
    ops = {n.op for n in g.node}
    for f in g.library.function:
        ops |= {n.op for n in f.node_def}
    return ops


def dataset_chain(g: tf.compat.v1.GraphDef) -> list[str]:
    """Dataset op types from the source to the output, following input 0."""
    nodes = {n.name: n for n in g.node}
    outs = [n for n in g.node if "Dataset" in n.op]
    consumed = {i.split(":")[0].lstrip("^") for n in outs for i in n.input}
    tail = [n for n in outs if n.name not in consumed]
    assert tail, "no output dataset node"
    chain, node = [], tail[0]
    # (inputs are node names; only dataset nodes are followed)
    while node is not None:
        chain.append(node.op)
        inputs = [nodes.get(i.split(":")[0]) for i in node.input if not i.startswith("^")]
        inputs = [n for n in inputs if n is not None and "Dataset" in n.op]
        if node.op == "ZipDataset":  # enumerate() = zip(range, ds): follow the data
            inputs = [n for n in inputs if n.op != "RangeDataset"]
        nxt = inputs[0] if inputs else None
        node = nxt if nxt is not None and "Dataset" in nxt.op else None
    return chain[::-1]
