"""Segmentation export: `tfpipe export` of a per-pixel model, the skew test (a fresh
process without tfpipe == the eval pipeline, bit for bit), the class map at each
request image's size against an exact NumPy/rational oracle of the inverse
letterbox, TF Serving files, REST, bad input and refused models."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from PIL import Image

pytestmark = pytest.mark.xdist_group("export")

SIZE = (40, 56)  # not square: a transposed height/width shows
K = 4  # the generator's classes: background, circle, square, triangle


@pytest.fixture(scope="module")
def seg_data(tmp_path_factory) -> Path:
    """The sample-data generator's shapes-on-photos, converted with their masks by
    `tfpipe.convert`, all in `val`, one shard (record i = sample index i). Sizes
    from below to above the model's (the letterbox scales up and down)."""
    from tfpipe.convert import convert
    from tfpipe.sample_data import make_segmentation_folder

    root = tmp_path_factory.mktemp("seg-export")
    raw = make_segmentation_folder(root / "raw", num_images=7, size_range=(23, 97), seed=3,
                                   png_fraction=0.4)
    manifest = convert(raw / "images", root / "data", masks=raw / "masks",
                       classes=raw / "classes.txt", split={"val": 1.0})
    assert not manifest.splits["val"].skipped
    assert len(list((root / "data").glob("val-*.tfrecord"))) == 1
    return root / "data"


@pytest.fixture(scope="module")
def seg_config(seg_data) -> dict:
    return {"data": {"path": str(seg_data), "task": "segmentation", "image_size": list(SIZE)},
            "pipeline": {"batch_size": 3}}


@pytest.fixture(scope="module")
def seg_model():
    """Per-pixel logits [B, 40, 56, 4] from two 3x3 convolutions, fixed weights."""
    import keras

    keras.utils.set_random_seed(1)
    inp = keras.Input((*SIZE, 3))
    x = keras.layers.Conv2D(6, 3, padding="same", activation="relu")(inp)
    return keras.Model(inp, keras.layers.Conv2D(K, 3, padding="same")(x))


@pytest.fixture(scope="module")
def seg_blobs(seg_data) -> list[bytes]:
    """The val records' encoded images, in record order."""
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string)}
    return [tf.io.parse_single_example(r, spec)["image/encoded"].numpy()
            for r in tf.data.TFRecordDataset([str(p) for p in
                                              sorted(seg_data.glob("val-*.tfrecord"))])]


@pytest.fixture(scope="module")
def cli_export(tmp_path_factory, seg_config, seg_model) -> tuple[Path, dict]:
    """ONE export for this module, through `tfpipe export` (JSON config, .keras model)."""
    from tfpipe.cli.main import cli

    tmp = tmp_path_factory.mktemp("seg-cli")
    seg_model.save(tmp / "seg.keras")
    (tmp / "cfg.yaml").write_text(json.dumps(seg_config))  # YAML reads JSON
    r = CliRunner().invoke(cli, ["export", str(tmp / "cfg.yaml"), "--model",
                                 str(tmp / "seg.keras"), "--out", str(tmp / "out"),
                                 "--warmup", "4", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return tmp / "out", json.loads(r.output)


@pytest.fixture(scope="module")
def seg_loaded(cli_export):
    return tf.saved_model.load(cli_export[1]["version_dir"])


FRESH = """
import json, sys
import numpy as np
import tensorflow as tf
version_dir, blobs, out = sys.argv[1], sys.argv[2], sys.argv[3]
data = tf.constant([bytes.fromhex(h) for h in json.load(open(blobs))])
m = tf.saved_model.load(version_dir)
pre = m.signatures["preprocess"](image_bytes=data)
res = m.signatures["serving_default"](image_bytes=data)
np.savez(out, image=pre["image"].numpy(), pre_size=pre["image_size"].numpy(),
         **{k: v.numpy() for k, v in res.items()})
print(json.dumps({"tfpipe_loaded": any(k.startswith("tfpipe") for k in sys.modules)}))
"""


@pytest.fixture(scope="module")
def seg_fresh(cli_export, seg_blobs, tmp_path_factory) -> dict:
    """preprocess + serving_default on the records' bytes in a process without tfpipe."""
    tmp = tmp_path_factory.mktemp("seg-fresh")
    (tmp / "blobs.json").write_text(json.dumps([b.hex() for b in seg_blobs]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", FRESH, cli_export[1]["version_dir"],
                           str(tmp / "blobs.json"), str(tmp / "out.npz")],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(np.load(tmp / "out.npz"))
    return {**got, **json.loads(proc.stdout.strip().splitlines()[-1])}


# ------------------------------------------------------------------ the oracle
def oracle_window(h: int, w: int) -> tuple[int, int, int, int]:
    """The letterbox as documented (augment.letterbox_window): scale to fit, sides rounded
    (half to even, float64, as the pipeline's op), centred, odd pixel bottom/right."""
    scale = min(SIZE[0] / h, SIZE[1] / w)
    nh = int(np.clip(np.round(h * scale), 1, SIZE[0]))
    nw = int(np.clip(np.round(w * scale), 1, SIZE[1]))
    return (SIZE[0] - nh) // 2, (SIZE[1] - nw) // 2, nh, nw


def oracle_class_map(model_map: np.ndarray, h: int, w: int) -> np.ndarray:
    """The model's class map [H, W] at an (h, w) request: every request pixel centre
    through the letterbox matrix M (exact rationals: x_o = (x + 1/2) nw / w - 1/2 +
    left), the nearest model pixel (half away from zero), i.e. the argmax map warped
    nearest through M^-1."""
    top, left, nh, nw = oracle_window(h, w)

    def nearest(n: int, length: int, start: int) -> np.ndarray:
        out = []
        for i in range(n):
            c = (Fraction(2 * i + 1, 2) * Fraction(length, n) - Fraction(1, 2) + start)
            r = (abs(c) + Fraction(1, 2)).__floor__()
            out.append(r if c >= 0 else -r)
        return np.array(out)

    return model_map[np.ix_(nearest(h, nh, top), nearest(w, nw, left))]


def _decoded_size(blob: bytes) -> tuple[int, int]:
    with Image.open(io.BytesIO(blob)) as im:
        return im.height, im.width


def _eval_images(config, n: int) -> tuple[np.ndarray, set[str]]:
    """The eval pipeline's images by sample index, and the ops of its graph."""
    from tfpipe import build_pipeline

    ds = build_pipeline(config, split="val", keep_index=True)
    by_index = {}
    for batch in ds:
        for i, idx in enumerate(batch["index"].numpy()):
            by_index[int(idx)] = batch["image"][i].numpy()
    assert sorted(by_index) == list(range(n))
    g = tf.compat.v1.GraphDef.FromString(ds._as_serialized_graph(  # noqa: SLF001
        external_state_policy=tf.data.experimental.ExternalStatePolicy.IGNORE).numpy())
    ops = {n.op for n in g.node} | {n.op for f in g.library.function for n in f.node_def}
    return np.stack([by_index[i] for i in range(n)]), ops


# ------------------------------------------------------------------ tests
@pytest.mark.slow  # the fresh process
def test_fresh_process_is_the_eval_pipeline_and_class_map_is_the_oracle(
        seg_fresh, seg_config, seg_blobs, seg_model):
    from tfpipe import augment, native

    assert seg_fresh["tfpipe_loaded"] is False
    want, ops = _eval_images(seg_config, len(seg_blobs))
    if native.available():  # then it is the native decode vs its pure-TF twin
        assert "TfpipeDecodeJpegStrict" in ops, ops
    assert any(b.startswith(b"\xff\xd8") for b in seg_blobs)
    assert any(b.startswith(b"\x89PNG") for b in seg_blobs)
    got = seg_fresh["image"]
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    for i in range(len(seg_blobs)):
        assert np.array_equal(got[i], want[i]), f"record {i}: max |diff| " \
                                                 f"{np.abs(got[i] - want[i]).max()}"
    # the model on exactly that input: scores = softmax(logits), argmax of the logits
    logits = seg_model(want, training=False).numpy()
    np.testing.assert_allclose(seg_fresh["scores"], tf.nn.softmax(logits).numpy(),
                               rtol=1e-5, atol=1e-6)
    top2 = np.sort(logits, axis=-1)[..., -2:]
    clear = top2[..., 1] - top2[..., 0] > 1e-4  # no near tie between the two best
    assert clear.mean() > 0.99
    mm = seg_fresh["model_class_map"]
    assert mm.dtype == np.int32 and mm.shape == (len(seg_blobs), *SIZE)
    assert np.array_equal(mm[clear], logits.argmax(-1)[clear])
    # each image at its own size, the batch padded with -1 to the largest
    sizes = [_decoded_size(b) for b in seg_blobs]
    assert sorted({s[0] < SIZE[0] for s in sizes}) == [False, True]  # up and down
    assert seg_fresh["image_size"].tolist() == [list(s) for s in sizes]
    assert np.array_equal(seg_fresh["pre_size"], seg_fresh["image_size"])
    cmap = seg_fresh["class_map"]
    assert cmap.dtype == np.int32
    assert cmap.shape == (len(sizes), max(h for h, _ in sizes), max(w for _, w in sizes))
    for i, (h, w) in enumerate(sizes):
        assert seg_fresh["window"][i].tolist() == list(oracle_window(h, w))
        # the oracle's matrix is the pipeline's letterbox_matrix
        top, left, nh, nw = oracle_window(h, w)
        m = np.array([[nw / w, 0, 0.5 * nw / w - 0.5 + left],
                      [0, nh / h, 0.5 * nh / h - 0.5 + top], [0, 0, 1]])
        np.testing.assert_allclose(augment.letterbox_matrix((h, w), SIZE).numpy(), m,
                                   atol=1e-5)
        assert np.array_equal(cmap[i, :h, :w], oracle_class_map(mm[i], h, w)), i
        assert (cmap[i, h:] == -1).all() and (cmap[i, :, w:] == -1).all()


def test_signatures_serving_files_and_warmup(cli_export, seg_loaded):
    from tfpipe.export import check_models_config, read_warmup, verify_export

    out, res = cli_export
    assert res["model_name"] == "seg" and res["warmup_records"] == 4
    assert res["class_names"] == ["background", "circle", "square", "triangle"]
    sig = res["signatures"]
    h, w = SIZE
    assert sig["serving_default"]["inputs"] == {"image_bytes": {"dtype": "string",
                                                                "shape": [None]}}
    assert {k: (v["dtype"], v["shape"]) for k, v in sig["serving_default"]["outputs"].items()} \
        == {"class_map": ("int32", [None, None, None]), "image_size": ("int32", [None, 2]),
            "window": ("int32", [None, 4]), "scores": ("float32", [None, h, w, K]),
            "model_class_map": ("int32", [None, h, w])}
    assert {k: v["shape"] for k, v in sig["preprocess"]["outputs"].items()} == {
        "image": [None, h, w, 3], "image_size": [None, 2], "window": [None, 4]}
    assert sig["predict_preprocessed"]["inputs"]["image"]["shape"] == [None, h, w, 3]
    assert sorted(sig["predict_preprocessed"]["outputs"]) == ["model_class_map", "scores"]
    assert sorted(seg_loaded.signatures) == sorted(sig)
    vdir = Path(res["version_dir"])
    meta = json.loads((vdir / "export_manifest.json").read_text())
    assert meta["preprocessing"]["kind"] == "segmentation"
    assert meta["preprocessing"]["ignore_label"] == 255
    (entry,) = check_models_config(out / "models.config")
    assert entry.name == "seg" and entry.versions == [] and Path(entry.base_path) == vdir.parent
    logs = read_warmup(vdir / "assets.extra" / "tf_serving_warmup_requests", sig)
    assert len(logs) == 4
    # the warm-up requests run (what the server replays when it loads the model)
    req = logs[1].predict_log.request
    batch = tf.make_ndarray(req.inputs["image_bytes"])
    y = seg_loaded.signatures["serving_default"](image_bytes=tf.constant(list(batch)))
    assert y["class_map"].shape[0] == len(batch) > 1
    assert verify_export(str(out)).ok


def test_batch_padding_equals_single_requests_and_rest(seg_loaded, seg_blobs):
    """A batch of different sizes: each image's crop of the padded class map is what it
    gets alone; REST (row format) carries the same per instance."""
    from tfpipe.export import rest_predict, rest_predict_body

    fn = seg_loaded.signatures["serving_default"]
    pick = seg_blobs[:3]
    both = fn(image_bytes=tf.constant(pick))
    for i, blob in enumerate(pick):
        alone = fn(image_bytes=tf.constant([blob]))
        h, w = alone["image_size"].numpy()[0]
        assert alone["class_map"].shape == (1, h, w)
        assert np.array_equal(both["class_map"].numpy()[i, :h, :w], alone["class_map"][0])
    rest = rest_predict(seg_loaded, rest_predict_body(pick))["predictions"]
    for i, p in enumerate(rest):
        h, w = p["image_size"]
        assert np.array_equal(np.array(p["class_map"])[:h, :w],
                              both["class_map"].numpy()[i, :h, :w])


def test_bad_input_names_the_element(seg_loaded, seg_blobs):
    fn = seg_loaded.signatures["serving_default"]
    png = next(b for b in seg_blobs if b.startswith(b"\x89PNG"))
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        fn(image_bytes=tf.constant([seg_blobs[0], b"", b"not an image at all", png[:-40]]))
    msg = e.value.message
    assert "image_bytes[1]: empty (0 bytes)" in msg
    assert "image_bytes[2]: not a JPEG, PNG, GIF, BMP or WebP image" in msg
    assert "image_bytes[3]: truncated PNG" in msg and "image_bytes[0]" not in msg
    with pytest.raises(tf.errors.InvalidArgumentError, match="no images"):
        fn(image_bytes=tf.constant([], tf.string))
    # a wrong dtype never reaches the graph (TF Serving answers the same before running)
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a string tensor "
                                                             "but is a float tensor"):
        fn(image_bytes=tf.constant([1.0, 2.0]))
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a float tensor"):
        seg_loaded.signatures["predict_preprocessed"](image=tf.zeros([1, *SIZE, 3], tf.uint8))


@pytest.mark.parametrize("make,match", [
    pytest.param(lambda k: k.layers.Conv2D(K, 3, strides=2, padding="same"),
                 r"per-pixel scores \[batch, 40, 56, num_classes\].*UpSampling2D",
                 id="stride-2"),
    pytest.param(lambda k: k.layers.Conv2D(1, 1), r"1 channel per pixel.*num_classes >= 2",
                 id="one-channel"),
    pytest.param(lambda k: k.layers.Conv2D(5, 1),
                 r"returns 5 classes per pixel, data.num_classes is 4", id="num-classes"),
    pytest.param(lambda k: k.Sequential([k.layers.GlobalAveragePooling2D(),
                                         k.layers.Dense(K)]),
                 r"per-pixel scores", id="classifier"),
])
def test_refused_models(seg_config, tmp_path, make, match):
    import keras

    from tfpipe.export import ExportError, export_serving

    cfg = {**seg_config, "data": {**seg_config["data"], "num_classes": K}}
    inp = keras.Input((*SIZE, 3))
    model = keras.Model(inp, make(keras)(inp))
    with pytest.raises(ExportError, match=match):
        export_serving(cfg, model, tmp_path / "out", warmup=0, serving_config=False)
    assert not (tmp_path / "out").exists()


def test_tflite_is_refused_for_segmentation(seg_config, seg_model, tmp_path):
    from tfpipe.export import ExportError, export_serving

    with pytest.raises(ExportError, match="tflite.*segmentation"):
        export_serving(seg_config, seg_model, tmp_path / "o", warmup=0, serving_config=False,
                       tflite=True)


def test_window_in_a_traced_graph_is_the_oracle_for_many_sizes():
    """The letterbox window (float64 ops) traced in a graph, as the SavedModel runs it
    (grappler applied), against the oracle for every height 1..1200 at widths around
    the model's aspect and far from it: no size puts the served window (and so the
    class map) off the pipeline's by a rounding."""
    from tfpipe.pipeline.serving import EvalPreprocessing
    from tfpipe.pipeline._settings import settings

    pre = EvalPreprocessing(settings({"data": {"path": "unused", "task": "segmentation",
                                               "image_size": list(SIZE)}}))
    hs = np.arange(1, 1201)
    sizes = np.array([(h, w) for w in (1, 7, 39, 55, 56, 57, 111, 640, 1999) for h in hs],
                     np.int32)
    got = tf.function(lambda s: tf.vectorized_map(pre.window, s))(tf.constant(sizes)).numpy()
    want = np.array([oracle_window(int(h), int(w)) for h, w in sizes])
    bad = np.flatnonzero((got != want).any(axis=1))
    assert not bad.size, [(sizes[i].tolist(), got[i].tolist(), want[i].tolist())
                          for i in bad[:5]]


def test_class_map_follows_the_painted_shapes(seg_config, seg_data, seg_blobs):
    """Ground truth instead of an oracle of the mapping: a 1x1 "colour model" (red ->
    circle, green -> square, blue -> triangle, dark photo -> background: the sample
    generator's palette) served by the same module; the class map at each request
    image's size agrees with the record's own mask (decoded by PIL) off the shapes'
    boundary ring and the few pixels the model's coarser grid moves."""
    import keras

    from tfpipe.export import SegmentServingModule
    from tfpipe.pipeline.serving import eval_preprocessing

    pre = eval_preprocessing(seg_config)
    mean, std = np.array(pre.settings.mean), np.array(pre.settings.std)
    norm = lambda v: (v / 255.0 - mean) / std  # noqa: E731 - the pipeline's normalize
    kernel, bias = np.zeros((1, 1, 3, K)), np.zeros(K)
    for k, c in ((1, 0), (2, 1), (3, 2)):  # class k is bright in channel c
        kernel[0, 0, c, k] = 10.0
        bias[k] = -10.0 * norm(170.0)[c]  # above any darkened photo pixel (<= 115)
    conv = keras.layers.Conv2D(K, 1)
    model = keras.Sequential([keras.Input((*SIZE, 3)), conv])
    conv.set_weights([kernel, bias])
    module = SegmentServingModule(model, pre, "logits")
    got = module.serving_default(tf.constant(seg_blobs))
    spec = {"image/segmentation/class/encoded": tf.io.FixedLenFeature([], tf.string)}
    masks = [np.asarray(Image.open(io.BytesIO(tf.io.parse_single_example(r, spec)[
        "image/segmentation/class/encoded"].numpy()))) for r in tf.data.TFRecordDataset(
        [str(p) for p in sorted(seg_data.glob("val-*.tfrecord"))])]
    agree = []
    for i, mask in enumerate(masks):
        h, w = mask.shape
        assert got["image_size"][i].numpy().tolist() == [h, w]
        cmap = got["class_map"][i, :h, :w].numpy()
        known = mask != 255
        agree.append(float((cmap == mask)[known].mean()))
        assert (cmap[known & (mask > 0)] > 0).mean() > 0.9, i  # the shapes are found
    assert min(agree) > 0.98 and np.mean(agree) > 0.99, agree
