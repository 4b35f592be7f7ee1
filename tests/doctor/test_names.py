"""Findings name the user's function (and where it is) however it was traced."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import doctor

from . import gallery


@pytest.mark.parametrize("library_name, expected", [
    ("__inference_Dataset_map_my_fn_123", "my_fn"),
    ("__inference_Dataset_flat_map_read_one_file_27", None),  # TFRecordDataset's own
    ("__inference_Dataset_flat_map_read_shard_27", "read_shard"),
    ("__inference_Dataset_filter_lambda_86", "lambda"),
    ("__inference_Dataset_map_A.meth_75", "A.meth"),
    ("__inference_Dataset_interleave_classabc.ABCMeta_30", None),
    ("__inference_Dataset_map_class__main__.Augment_9", "Augment"),
    ("__inference_helper_58", "helper"),
    ("__inference_tf_data_experimental_parallel_interleave_parse_101", "parse"),
    ("cond_true_51", None),
])
def test_function_display_name(library_name, expected):
    assert doctor.function_display_name(library_name) == expected


def _py_helper(x):
    return tf.numpy_function(lambda v: v, [x], tf.float32)


def calls_plain_helper(x):
    # A plain-Python helper is inlined into the traced map function.
    return _py_helper(x) + 1.0


class Augment:
    def __call__(self, x):
        return tf.numpy_function(lambda v: v, [x], tf.float32)

    def method(self, x):
        return tf.numpy_function(lambda v: v, [x], tf.float32)


def _findings(fn):
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((8, 4), np.float32))
    ds = ds.map(fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(1)
    return [f for f in doctor.check(ds, cpus=4, host_cpus=4) if f.rule == "python-in-map"]


@pytest.mark.parametrize("fn, function, call_path", [
    (calls_plain_helper, "calls_plain_helper", ("calls_plain_helper",)),
    (gallery.outer_fn, "outer_fn", ("outer_fn", "nested_helper")),
    (Augment(), "Augment", ("Augment",)),
    (Augment().method, "Augment.method", ("Augment.method",)),
])
def test_user_function_names(fn, function, call_path):
    (finding,) = _findings(fn)
    assert finding.function == function
    assert finding.call_path == call_path


def test_locations_point_at_the_def():
    locations = doctor.locate_functions(gallery.__file__)
    for fn in (gallery.my_augment, gallery.nested_helper.python_function, gallery.outer_fn):
        line = inspect.getsourcelines(fn)[1]
        # getsourcelines starts at the decorator; the def follows it.
        assert locations[fn.__name__].rsplit(":", 1)[1] in {str(line), str(line + 1)}
    ds = tf.data.Dataset.from_tensor_slices(np.zeros((8, 4), np.float32))
    ds = ds.map(gallery.outer_fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(1)
    (finding,) = doctor.check(ds, locations=locations, cpus=4, host_cpus=4)
    # The py_function sits in nested_helper: the location points there.
    assert finding.location == locations["nested_helper"]
    assert finding.location.startswith(gallery.__file__)


def test_unknown_rule_id_is_rejected():
    ds = tf.data.Dataset.range(3)
    with pytest.raises(ValueError, match="no-such-rule"):
        doctor.check(ds, ignore=["no-such-rule"])


def test_rules_table_is_complete():
    for rule_id, spec in doctor.RULES.items():
        assert spec.id == rule_id and spec.severity in doctor.SEVERITY_RANK and spec.title
