"""`FusedPixel` takes the uint8 batch only, on both of its paths.

The native chain accepts float32 [0, 1] with to_float, but the pure-TF twin
(`augment.on_device.color_chain`) reads its input as levels 0..255, so a float32
batch gave two different answers (up to 4 normalized units apart). Every
pipeline caller hands over the decoded uint8 batch; anything else is refused
with the dtype named, natively and in plain TF alike.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.pipeline._settings import Op
from tfpipe.pipeline.fast import FusedPixel
from tfpipe import switches

OPS = [Op("brightness", params={"max_delta": 0.4}), Op("contrast", params={"lower": 0.6, "upper": 1.4})]
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


@pytest.fixture(params=["native", "plain-tf"])
def fused(request, monkeypatch) -> FusedPixel:
    from tfpipe.native import pixel

    if request.param == "plain-tf":
        monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    elif not pixel.available():
        pytest.skip("native pixel chain not built")
    f = FusedPixel(OPS, MEAN, STD)
    assert f.native() == (request.param == "native")
    return f


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16, tf.int32])
@pytest.mark.parametrize("to_float", [True, False])
def test_non_uint8_input_is_refused_naming_the_dtype(fused, dtype, to_float):
    x = tf.cast(tf.constant(np.random.default_rng(0).random((2, 8, 8, 3))), dtype)
    p, a = tf.constant([[0.1, 1.2], [-0.1, 0.8]]), tf.ones([2, 2], tf.bool)
    with pytest.raises(ValueError, match=rf"uint8 batch .*got {dtype.name}$"):
        fused(x, p, a, to_float=to_float, normalize=to_float)
    # the same in a traced function (the pipeline's batch map): refused at trace time
    fn = tf.function(lambda x: fused(x, p, a, to_float=to_float, normalize=False))
    with pytest.raises(ValueError, match=dtype.name):
        fn.get_concrete_function(tf.TensorSpec([None, 8, 8, 3], dtype))


def test_uint8_input_is_the_same_on_both_paths(monkeypatch):
    """The accepted input: native and twin agree to the bit (tests/native covers more)."""
    from tfpipe.native import pixel

    if not pixel.available():
        pytest.skip("native pixel chain not built")
    x = tf.constant(np.random.default_rng(1).integers(0, 256, (2, 8, 8, 3), dtype=np.uint8))
    p, a = tf.constant([[0.1, 1.2], [-0.1, 0.8]]), tf.ones([2, 2], tf.bool)
    native = FusedPixel(OPS, MEAN, STD)(x, p, a, to_float=True, normalize=True)
    monkeypatch.setitem(switches.OVERRIDES, "TFPIPE_NATIVE", False)
    plain = FusedPixel(OPS, MEAN, STD)
    assert not plain.native()
    np.testing.assert_array_equal(native.numpy(), plain(x, p, a, to_float=True, normalize=True).numpy())
