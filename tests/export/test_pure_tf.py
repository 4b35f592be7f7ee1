"""`tfpipe.native.pure_tf()`: this thread traces the pure-TF twins, others keep the
kernels; and the serving preprocessing traced under it holds no native op."""

from __future__ import annotations

import threading

import pytest
import tensorflow as tf

from tfpipe import native

pytestmark = pytest.mark.xdist_group("export")


def _ops(fn) -> set[str]:
    g = fn.get_concrete_function().graph.as_graph_def()
    ops = {n.op for n in g.node}
    for f in g.library.function:
        ops |= {n.op for n in f.node_def}
    return ops


@pytest.mark.skipif(not native.available(), reason="native kernels unavailable (not built, or TFPIPE_NATIVE=0)")
def test_pure_tf_is_per_thread_and_nests():
    seen = {}
    inside, release = threading.Event(), threading.Event()

    def other():
        inside.wait(10)
        seen["other"] = native.available()
        release.set()

    t = threading.Thread(target=other)
    t.start()
    with native.pure_tf():
        with native.pure_tf():
            assert not native.available()
        assert not native.available()
        assert "native.pure_tf()" in native.status()["detail"]
        inside.set()
        release.wait(10)
    t.join(10)
    assert seen["other"] is True and native.available()


@pytest.mark.skipif(not native.available(), reason="native kernels unavailable (not built, or TFPIPE_NATIVE=0)")
def test_serving_preprocessing_traces_stock_ops_only(config, photo_bytes):
    from tfpipe.pipeline.serving import eval_preprocessing

    data = tf.constant(photo_bytes["astronaut.jpg"])

    def traced(stock: bool):
        pre = eval_preprocessing(config, stock_ops=stock)
        return tf.function(lambda: pre.finish(pre.image(data)[None]))

    stock, native_ops = _ops(traced(True)), _ops(traced(False))
    assert not {o for o in stock if o.startswith("Tfpipe")}
    assert {"TfpipeResizeBilinearU8", "TfpipeDecodeJpegStrict", "TfpipePixelChain"} <= native_ops
    assert tf.reduce_all(traced(True)() == traced(False)())
