"""The colour-chain op table (`tfpipe.native.chain_ops`) is the one list of the ops:
the plain-TF chain, the pipeline's fused stage and the C++ kernel all follow it.

pixel.cc does not name the ops: its enum is generated from the table at build
time, and an op marked native without C++ code fails the build (-Werror=switch,
checked by hand: too slow for a test). Here, cheaply: each op has its sampler and
kernel, the generated header and the cache key follow the table, and the built
library accepts exactly the table's native ops, each doing what its plain-TF
kernel does.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from tfpipe.augment import color, on_device
from tfpipe.native import build, chain_ops
from tfpipe.native import pixel as NP
from tfpipe.pipeline import fast

from .conftest import needs

# the native op's parameter for each table op (a value inside its sampler's range)
PARAM = {"brightness": 0.21, "contrast": 1.37, "saturation": 0.55, "hue": 0.1, "gamma": 1.3}


def test_every_op_has_its_sampler_and_kernel_and_one_list():
    assert set(PARAM) == set(chain_ops.CHAIN_OPS)
    assert set(chain_ops.NATIVE_OPS) < set(chain_ops.CHAIN_OPS)
    for name in chain_ops.CHAIN_OPS:
        assert callable(getattr(color, chain_ops.sampler(name)))
        assert callable(getattr(color, chain_ops.kernel(name)))
    # the other modules read the table, they do not keep their own list
    assert on_device.CHAIN_OPS == chain_ops.CHAIN_OPS
    assert list(fast.FUSABLE) == list(chain_ops.CHAIN_OPS)


def test_generated_header_and_cache_key_follow_the_table(monkeypatch):
    text = build.generated()["tfpipe_chain_ops.h"]
    rows = re.findall(r'X\((k\w+), "(\w+)"\)', text)
    assert [n for _, n in rows] == list(chain_ops.NATIVE_OPS)
    assert [k for k, _ in rows] == ["kBrightness", "kContrast", "kSaturation"]
    key = build.cache_key()
    monkeypatch.setattr(chain_ops, "NATIVE_OPS", (*chain_ops.NATIVE_OPS, "hue"))
    assert 'X(kHue, "hue")' in build.generated()["tfpipe_chain_ops.h"]
    assert build.cache_key() != key  # a library built for another table is never loaded


@needs(NP.available(), "native pixel chain")
@pytest.mark.parametrize("to_float", [False, True])
def test_built_library_runs_exactly_the_native_ops(to_float):
    from tfpipe import native

    rng = np.random.default_rng(3)
    x = tf.constant(rng.integers(0, 256, (2, 9, 11, 3), dtype=np.uint8))
    plain = tf.cast(x, tf.float32) * (1.0 / 255.0) if to_float else x  # the chain's load
    for name in chain_ops.CHAIN_OPS:
        params = tf.fill([2, 1], PARAM[name])
        # the op itself, not the Python wrapper (which checks the table first)
        run = lambda: native.load().tfpipe_pixel_chain(  # noqa: E731
            x, params, tf.ones([2, 1], tf.bool), out_dtype=tf.float32 if to_float else tf.uint8,
            ops=[name], gated=[False], to_float=to_float, normalize=False, mean=[], std=[])
        if name not in chain_ops.NATIVE_OPS:
            allowed = ", ".join(chain_ops.NATIVE_OPS)
            with pytest.raises(tf.errors.InvalidArgumentError,
                               match=f"unknown colour op '{name}'; allowed: {allowed}(?![,\\w])"):
                run()
            continue
        want = getattr(color, chain_ops.kernel(name))(plain, params[:, 0])
        np.testing.assert_array_equal(run().numpy(), want.numpy(), err_msg=name)
