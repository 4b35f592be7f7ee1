"""The task and geometric-op registries: one declaration each, asked by every site.

Oracles: the config models' own defaults and the public `tfpipe.augment` ops (each
returns the matrix it applied), never the registry's own tables.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tfpipe import augment
from tfpipe.config import CROP_RATIO, CROP_SCALE, GEOMETRY_OPS, TASK_RULES
from tfpipe.config.ops import RandomResizedCrop
from tfpipe.errors import ConfigError
from tfpipe.pipeline import TASKS, task_of
from tfpipe.pipeline._geometry_ops import GEOMETRY, MATRIX_OPS, apply_one, matrix
from tfpipe.pipeline._settings import Op

SRC = Path(__file__).resolve().parents[2] / "src" / "tfpipe"


def test_crop_defaults_are_one_set_of_numbers():
    field = RandomResizedCrop.model_fields
    assert tuple(field["scale"].default) == CROP_SCALE == augment.CROP_SCALE
    assert tuple(field["ratio"].default) == CROP_RATIO == augment.CROP_RATIO


def test_registries_cover_the_config():
    assert list(GEOMETRY) == list(GEOMETRY_OPS)
    # an op has a matrix exactly when its config model says targets can follow it
    assert {n for n, g in GEOMETRY.items() if g.matrix is None} == {
        n for n, c in GEOMETRY_OPS.items() if not c.affine} == {"elastic"}
    for name, task in TASKS.items():
        assert task.rules is TASK_RULES[name]


def test_no_site_tests_the_task_by_name():
    """Every place that varies by task asks the entry (`task_of`), not `task == ...`."""
    found = []
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        if ".task" not in text:
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Attribute) and side.attr == "task"
                    for side in [node.left, *node.comparators]):
                found.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert not found, found


@pytest.mark.parametrize("name", MATRIX_OPS)
def test_registry_matrix_is_the_public_ops_matrix(name):
    """Each op's registry matrix (coin included) is the matrix its public augment op
    applies to the image with the same seed, for p = 1 and p = 0.5."""
    params = {"flip": {"horizontal": True, "vertical": True},
              "affine": {"rotation": 20.0, "translate": [0.1, 0.1]},
              "pad_and_crop": {"padding": 3}}.get(name, {})
    image = tf.constant(np.random.default_rng(0).integers(0, 256, (12, 16, 3), np.uint8))
    out = (8, 8) if name in ("random_resized_crop", "center_crop") else (12, 16)
    for p in (1.0, 0.5):
        for s in range(2):
            seed = tf.constant([s, 7], tf.int64)
            op = Op(name=name, p=p, params=params)
            m, _ = matrix(op, seed, (tf.constant(12), tf.constant(16)), out)
            if name == "random_resized_crop":
                want = augment.random_resized_crop(image, seed, out)[1]
            elif name == "center_crop":
                want = augment.center_crop(image, out)[1]
            elif name == "flip":
                want = augment.random_flip(image, seed, True, True, p)[1]
            elif name == "rot90":
                want = augment.random_rot90(image, seed, p)[1]
            elif name == "affine":
                want = augment.random_affine(image, seed, rotation=20.0,
                                             translate=(0.1, 0.1))[1]
            else:
                want = augment.pad_and_crop(image, seed, padding=3)[1]
            if not GEOMETRY[name].own_coin and p < 1.0:
                from tfpipe.pipeline._plan import coin

                if not bool(coin(seed, p)):
                    want = augment.identity_matrix()
                    # and the unfused op leaves the image as it was
                    same = apply_one(op, image, seed, out)
                    np.testing.assert_array_equal(same.numpy(), image.numpy())
            np.testing.assert_allclose(m.numpy(), want.numpy(), rtol=0, atol=1e-6)


def test_unregistered_task_is_a_clear_error():
    class S:
        task, features = "nonesuch", None
    with pytest.raises(ConfigError, match="data.task: 'nonesuch' has no pipeline.*classification"):
        task_of(S())
