"""Detection export: `tfpipe export` of a model returning boxes / classes / scores /
keypoints / instance masks, the skew test (a fresh process without tfpipe == the eval
pipeline, bit for bit), boxes and keypoints in each request image's pixels against
NumPy, a painted-box ground truth, TF Serving files, REST, bad input, refused models."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from click.testing import CliRunner
from PIL import Image

pytestmark = pytest.mark.xdist_group("export")

SIZE = (40, 56)  # not square: a transposed height/width shows
N, K, S, C = 5, 3, 8, 2  # detections, keypoints, mask side, classes


@pytest.fixture(scope="module")
def det_data(tmp_path_factory, photo_bytes) -> Path:
    """Five real photos of five sizes (JPEG RGB / gray / progressive, RGBA PNG, BMP)
    with one COCO box each, converted by `tfpipe convert`, all in `val`, one shard."""
    from tfpipe.convert import convert

    root = tmp_path_factory.mktemp("det-export")
    (root / "images").mkdir()
    picks = ["astronaut.jpg", "coffee_301x207.jpg", "camera_gray.jpg", "chelsea_alpha.png",
             "astronaut.bmp"]
    images, anns = [], []
    for i, name in enumerate(picks):
        (root / "images" / name).write_bytes(photo_bytes[name])
        with Image.open(io.BytesIO(photo_bytes[name])) as im:
            w, h = im.size
        images.append({"id": i + 1, "file_name": name, "height": h, "width": w})
        anns.append({"id": i + 1, "image_id": i + 1, "category_id": (1, 3)[i % 2],
                     "bbox": [w / 8, h / 4, w / 2, h / 3], "iscrowd": 0})
    cats = [{"id": 3, "name": "cat"}, {"id": 1, "name": "person"}]
    (root / "instances.json").write_text(json.dumps({"images": images, "annotations": anns,
                                                     "categories": cats}))
    manifest = convert(root / "instances.json", root / "data", images=root / "images",
                       split={"val": 1.0}, workers=1)
    assert not manifest.splits["val"].skipped
    assert manifest.class_names == ["person", "cat"]
    return root / "data"


@pytest.fixture(scope="module")
def det_config(det_data) -> dict:
    return {"data": {"path": str(det_data), "task": "detection", "image_size": list(SIZE),
                     "max_boxes": 4},
            "pipeline": {"batch_size": 2}}


def _model(keypoints: bool = True, masks: bool = True):
    """A tiny detector head of plain layers, fixed weights: normalized boxes [B, N, 4]
    (sigmoid stretched to [-0.5, 1.5]: some past the edges), float class ids, scores,
    keypoints, masks."""
    import keras

    keras.utils.set_random_seed(2)
    L = keras.layers
    inp = keras.Input((*SIZE, 3))
    x = L.Conv2D(4, 3, strides=4, activation="relu")(inp)
    x = L.GlobalAveragePooling2D()(x)
    out = {"boxes": L.Rescaling(2.0, offset=-0.5)(L.Reshape((N, 4))(L.Dense(N * 4, "sigmoid")(x))),
           "classes": L.Rescaling(float(C - 1))(L.Dense(N, "sigmoid")(x)),
           "scores": L.Dense(N, "sigmoid")(x)}
    if keypoints:
        out["keypoints"] = L.Reshape((N, K, 3))(L.Dense(N * K * 3, "sigmoid")(x))
    if masks:
        out["instance_masks"] = L.Reshape((N, S, S))(L.Dense(N * S * S, "sigmoid")(x))
    return keras.Model(inp, out)


@pytest.fixture(scope="module")
def det_model():
    return _model()


@pytest.fixture(scope="module")
def det_blobs(det_data) -> list[bytes]:
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string)}
    return [tf.io.parse_single_example(r, spec)["image/encoded"].numpy()
            for r in tf.data.TFRecordDataset([str(p) for p in
                                              sorted(det_data.glob("val-*.tfrecord"))])]


@pytest.fixture(scope="module")
def cli_export(tmp_path_factory, det_config, det_model) -> tuple[Path, dict]:
    """ONE export for this module, through `tfpipe export` (JSON config, .keras model)."""
    from tfpipe.cli.main import cli

    tmp = tmp_path_factory.mktemp("det-cli")
    det_model.save(tmp / "det.keras")
    (tmp / "cfg.yaml").write_text(json.dumps(det_config))  # YAML reads JSON
    r = CliRunner().invoke(cli, ["export", str(tmp / "cfg.yaml"), "--model",
                                 str(tmp / "det.keras"), "--out", str(tmp / "out"),
                                 "--warmup", "3", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return tmp / "out", json.loads(r.output)


@pytest.fixture(scope="module")
def det_loaded(cli_export):
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
np.savez(out, image=pre["image"].numpy(), pre_sizes=pre["image_size"].numpy(),
         **{k: v.numpy() for k, v in res.items()})
print(json.dumps({"tfpipe_loaded": any(k.startswith("tfpipe") for k in sys.modules)}))
"""


@pytest.fixture(scope="module")
def det_fresh(cli_export, det_blobs, tmp_path_factory) -> dict:
    """preprocess + serving_default on the records' bytes (five sizes in ONE batch) in a
    process without tfpipe."""
    tmp = tmp_path_factory.mktemp("det-fresh")
    (tmp / "blobs.json").write_text(json.dumps([b.hex() for b in det_blobs]))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    proc = subprocess.run([sys.executable, "-c", FRESH, cli_export[1]["version_dir"],
                           str(tmp / "blobs.json"), str(tmp / "out.npz")],
                          capture_output=True, text=True, timeout=180, env=env, cwd=tmp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = dict(np.load(tmp / "out.npz", allow_pickle=True))
    return {**got, **json.loads(proc.stdout.strip().splitlines()[-1])}


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
def test_fresh_process_is_the_eval_pipeline_and_outputs_are_in_request_pixels(
        det_fresh, det_config, det_blobs, det_model):
    from tfpipe import native

    assert det_fresh["tfpipe_loaded"] is False
    want, ops = _eval_images(det_config, len(det_blobs))
    if native.available():  # then it is the native decode + resize vs their pure-TF twins
        assert "TfpipeDecodeJpegStrict" in ops, ops
    got = det_fresh["image"]
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    for i in range(len(det_blobs)):
        assert np.array_equal(got[i], want[i]), f"record {i}: max |diff| " \
                                                 f"{np.abs(got[i] - want[i]).max()}"
    # every request at its own size, in one batch
    sizes = np.array([_decoded_size(b) for b in det_blobs], np.int32)
    assert len({tuple(s) for s in sizes}) == len(det_blobs)
    assert np.array_equal(det_fresh["image_size"], sizes)
    assert np.array_equal(det_fresh["pre_sizes"], sizes)
    # the model on exactly that input
    y = {k: v.numpy() for k, v in det_model(want, training=False).items()}
    nb = det_fresh["normalized_boxes"]
    np.testing.assert_allclose(nb, y["boxes"], rtol=1e-5, atol=1e-6)
    assert (nb > 1).any() or (nb < 0).any()  # boxes past the edge: mapped, not clipped
    # the mapping, against NumPy in float32: normalized * the request's own (h, w)
    hw = sizes.astype(np.float32)
    assert det_fresh["boxes"].dtype == np.float32
    assert np.array_equal(det_fresh["boxes"], nb * np.concatenate([hw, hw], 1)[:, None, :])
    nk = det_fresh["normalized_keypoints"]
    np.testing.assert_allclose(nk, y["keypoints"], rtol=1e-5, atol=1e-6)
    kp = det_fresh["keypoints"]
    assert kp.shape == (len(sizes), N, K, 3)
    assert np.array_equal(kp[..., 0], nk[..., 0] * hw[:, None, None, 0])
    assert np.array_equal(kp[..., 1], nk[..., 1] * hw[:, None, None, 1])
    assert np.array_equal(kp[..., 2], nk[..., 2])  # the score passes through
    # masks: box-relative, as the model gives them
    assert det_fresh["instance_masks"].shape == (len(sizes), N, S, S)
    np.testing.assert_allclose(det_fresh["instance_masks"], y["instance_masks"], rtol=1e-5,
                               atol=1e-6)
    # float class ids rounded; names from the manifest (COCO's sorted category ids)
    classes = det_fresh["classes"]
    assert classes.dtype == np.int64
    near = np.abs(y["classes"] - np.round(y["classes"]) - 0.5 * np.sign(
        y["classes"] - np.round(y["classes"]))) > 1e-4  # not at a .5 tie
    assert np.array_equal(classes[near], np.round(y["classes"])[near].astype(np.int64))
    assert set(classes.ravel()) <= {0, 1} and len(set(classes.ravel())) == 2
    names = np.vectorize(lambda b: b.decode())(det_fresh["class_names"])
    assert np.array_equal(names, np.array(["person", "cat"])[classes])
    np.testing.assert_allclose(det_fresh["scores"], y["scores"], rtol=1e-5, atol=1e-6)
    assert det_fresh["num_detections"].tolist() == [N] * len(sizes)


def test_signatures_serving_files_and_warmup(cli_export, det_loaded):
    from tfpipe.export import check_models_config, parse_batching, read_warmup, verify_export

    out, res = cli_export
    assert res["model_name"] == "det" and res["warmup_records"] == 3
    assert res["class_names"] == ["person", "cat"]
    sig = res["signatures"]
    h, w = SIZE
    assert sig["serving_default"]["inputs"] == {"image_bytes": {"dtype": "string",
                                                                "shape": [None]}}
    assert {k: (v["dtype"], v["shape"]) for k, v in sig["serving_default"]["outputs"].items()} \
        == {"boxes": ("float32", [None, N, 4]), "normalized_boxes": ("float32", [None, N, 4]),
            "classes": ("int64", [None, N]), "class_names": ("string", [None, N]),
            "scores": ("float32", [None, N]), "num_detections": ("int32", [None]),
            "image_size": ("int32", [None, 2]), "keypoints": ("float32", [None, N, K, 3]),
            "normalized_keypoints": ("float32", [None, N, K, 3]),
            "instance_masks": ("float32", [None, N, S, S])}
    assert {k: v["shape"] for k, v in sig["preprocess"]["outputs"].items()} == {
        "image": [None, h, w, 3], "image_size": [None, 2]}
    assert sig["predict_preprocessed"]["inputs"]["image"]["shape"] == [None, h, w, 3]
    assert sorted(sig["predict_preprocessed"]["outputs"]) == [
        "class_names", "classes", "instance_masks", "normalized_boxes",
        "normalized_keypoints", "num_detections", "scores"]
    assert sorted(det_loaded.signatures) == sorted(sig)
    vdir = Path(res["version_dir"])
    meta = json.loads((vdir / "export_manifest.json").read_text())
    assert meta["preprocessing"]["kind"] == "detection"
    assert "top_k" not in meta and "outputs_are" not in meta
    (entry,) = check_models_config(out / "models.config")
    assert entry.name == "det" and Path(entry.base_path) == vdir.parent
    parse_batching((out / "batching_parameters.txt").read_text())
    logs = read_warmup(vdir / "assets.extra" / "tf_serving_warmup_requests", sig)
    assert len(logs) == 3
    # the warm-up requests run (what the server replays when it loads the model)
    for log in logs:
        req = log.predict_log.request
        assert req.model_spec.name == "det"
        batch = tf.make_ndarray(req.inputs["image_bytes"])
        y = det_loaded.signatures[req.model_spec.signature_name](
            image_bytes=tf.constant(list(batch)))
        assert y["boxes"].shape == (len(batch), N, 4)
    assert verify_export(str(out)).ok


def test_rest_row_and_columnar(det_loaded, det_blobs):
    """REST on two images of different sizes: each instance's answer is its row of the
    direct call, boxes in its own pixels."""
    from tfpipe.export import rest_predict, rest_predict_body

    fn = det_loaded.signatures["serving_default"]
    pick = [det_blobs[0], det_blobs[2]]
    direct = {k: v.numpy() for k, v in fn(image_bytes=tf.constant(pick)).items()}
    rows = rest_predict(det_loaded, rest_predict_body(pick))["predictions"]
    assert len(rows) == 2
    for i, row in enumerate(rows):
        assert row["image_size"] == list(_decoded_size(pick[i]))
        np.testing.assert_array_equal(np.float32(row["boxes"]), direct["boxes"][i])
        np.testing.assert_array_equal(np.float32(row["keypoints"]), direct["keypoints"][i])
        assert row["classes"] == direct["classes"][i].tolist()
        assert row["class_names"] == [b.decode() for b in direct["class_names"][i]]
        assert np.shape(row["instance_masks"]) == (N, S, S)
    body = json.dumps({"inputs": [{"b64": __import__("base64").b64encode(b).decode()}
                                  for b in pick]})
    cols = rest_predict(det_loaded, body)["outputs"]
    np.testing.assert_array_equal(np.float32(cols["boxes"]), direct["boxes"])
    assert cols["num_detections"] == [N, N]


def test_bad_input_names_the_element(det_loaded, det_blobs):
    fn = det_loaded.signatures["serving_default"]
    png = next(b for b in det_blobs if b.startswith(b"\x89PNG"))
    with pytest.raises(tf.errors.InvalidArgumentError) as e:
        fn(image_bytes=tf.constant([det_blobs[0], b"", b"not an image at all", png[:-40]]))
    msg = e.value.message
    assert "image_bytes[1]: empty (0 bytes)" in msg
    assert "image_bytes[2]: not a JPEG, PNG, GIF, BMP or WebP image" in msg
    assert "image_bytes[3]: truncated PNG" in msg and "image_bytes[0]" not in msg
    for sig in ("serving_default", "preprocess"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="no images"):
            det_loaded.signatures[sig](image_bytes=tf.constant([], tf.string))
    with pytest.raises(tf.errors.InvalidArgumentError, match="expected to be a float tensor"):
        det_loaded.signatures["predict_preprocessed"](image=tf.zeros([1, *SIZE, 3], tf.uint8))


def _refused(det_config, tmp_path, model, match, **kw):
    from tfpipe.export import ExportError, export_serving

    with pytest.raises(ExportError, match=match):
        export_serving(det_config, model, tmp_path / "out", warmup=0, serving_config=False,
                       **kw)
    assert not (tmp_path / "out").exists()


def test_refused_models_name_what_is_missing_and_found(det_config, tmp_path):
    import keras

    L = keras.layers
    inp = keras.Input((*SIZE, 3))
    x = L.GlobalAveragePooling2D()(inp)
    boxes = L.Reshape((N, 4))(L.Dense(N * 4)(x))
    logits = L.Dense(7)(x)
    # a dict without classes and scores: both named, and what it has
    _refused(det_config, tmp_path, keras.Model(inp, {"boxes": boxes, "logits": logits}),
             r"missing: classes, scores; found: boxes: float32 \(None, 5, 4\), "
             r"logits: float32 \(None, 7\)")
    # a classifier
    _refused(det_config, tmp_path, keras.Model(inp, logits),
             r"must return a dict with boxes .*got one tensor float32 \(None, 7\)")
    # boxes of the wrong shape; N disagreeing between outputs
    _refused(det_config, tmp_path, keras.Model(inp, {
        "boxes": L.Dense(4)(x), "classes": L.Dense(N)(x), "scores": L.Dense(N)(x)}),
        r"boxes: must be \[batch, N, 4\] normalized yxyx, got float32 \(None, 4\)")
    _refused(det_config, tmp_path, keras.Model(inp, {
        "boxes": boxes, "classes": L.Dense(N)(x), "scores": L.Dense(N + 1)(x)}),
        r"scores: 6 detections per image, boxes has 5")
    _refused(det_config, tmp_path, keras.Model(inp, [boxes, logits]),
             r"got a list of 2")


def test_tflite_is_refused_for_detection(det_config, tmp_path):
    _refused(det_config, tmp_path, _model(False, False),
             r"tflite: .*classification exports only, not data.task 'detection'", tflite=True)


class _PaintedBoxFinder:
    """A "model" that finds the bright rectangle in the model input (threshold, first
    and last bright row / column): its normalized box, class 1, score 1, and the box's
    top-left / bottom-right corners as two keypoints (visibility 2)."""

    def __call__(self, image: tf.Tensor, training: bool = False):
        bright = tf.reduce_min(image, axis=-1) > 0.0  # normalized: above the mean
        rows, cols = tf.reduce_any(bright, 2), tf.reduce_any(bright, 1)

        def edges(a: tf.Tensor, n: int) -> tuple[tf.Tensor, tf.Tensor]:
            i = tf.cast(tf.range(n), tf.float32)[None]
            first = tf.reduce_min(tf.where(a, i, float(n)), 1)
            last = tf.reduce_max(tf.where(a, i, -1.0), 1) + 1
            return first / n, last / n

        y0, y1 = edges(rows, SIZE[0])
        x0, x1 = edges(cols, SIZE[1])
        boxes = tf.stack([y0, x0, y1, x1], -1)[:, None, :]
        two = tf.fill(tf.shape(y0), 2.0)
        kp = tf.stack([tf.stack([y0, x0, two], -1), tf.stack([y1, x1, two], -1)], 1)
        ones = tf.ones_like(y0)[:, None]
        found = tf.cast(tf.reduce_any(rows, 1), tf.int64)  # the model's own count
        return {"boxes": boxes, "classes": ones, "scores": ones, "keypoints": kp[:, None],
                "num_detections": found,
                "instance_masks": tf.ones_like(y0)[:, None, None, None] * tf.ones([1, 4, 6])}


def test_boxes_land_on_the_painted_rectangle(det_config):
    """Ground truth instead of the mapping's formula: requests of three sizes (PNG and
    JPEG) with a white rectangle painted at known pixels; the served box and keypoints
    (request pixels) land on the painted rectangle within one model pixel's extent in
    the request (the resize blurs its edge by one pixel of the model input)."""
    from tfpipe.export import DetectServingModule, paste_instance_masks
    from tfpipe.pipeline.serving import eval_preprocessing

    pre = eval_preprocessing(det_config)
    module = DetectServingModule(_PaintedBoxFinder(), pre, ["person", "cat"])
    cases = [((97, 131), (20, 30, 70, 101), "png"), ((300, 200), (40, 120, 250, 190), "jpeg"),
             ((33, 47), (5, 0, 30, 20), "png")]
    blobs, painted = [], []
    for (h, w), (y0, x0, y1, x1), fmt in cases:
        img = np.zeros((h, w, 3), np.uint8)
        img[y0:y1, x0:x1] = 255
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format=fmt.upper(), quality=95)
        blobs.append(buf.getvalue())
        painted.append((y0, x0, y1, x1))
    black = io.BytesIO()
    Image.fromarray(np.zeros((21, 35, 3), np.uint8)).save(black, format="PNG")
    got = {k: v.numpy() for k, v in module.serving_default(
        tf.constant([*blobs, black.getvalue()])).items()}
    for i, ((h, w), _, _) in enumerate(cases):
        assert got["image_size"][i].tolist() == [h, w]
        tol = np.array([h / SIZE[0], w / SIZE[1]] * 2) * 1.01  # one model pixel
        assert (np.abs(got["boxes"][i, 0] - painted[i]) <= tol).all(), \
            (i, got["boxes"][i, 0], painted[i], tol)
        corners = got["keypoints"][i, 0]
        assert np.array_equal(corners[:, :2].ravel(), got["boxes"][i, 0])
        assert corners[:, 2].tolist() == [2.0, 2.0]
        # the (all-on) box-relative mask pasted back covers the painted pixels
        (pasted,) = paste_instance_masks(got["instance_masks"][i], got["boxes"][i], (h, w))
        y0, x0, y1, x1 = painted[i]
        truth = np.zeros((h, w), bool)
        truth[y0:y1, x0:x1] = True
        assert (pasted.astype(bool) & truth).sum() / (pasted.astype(bool) | truth).sum() > 0.9
    assert got["class_names"][:, 0].tolist() == [b"cat"] * 4
    assert got["instance_masks"].shape == (4, 1, 4, 6)
    assert got["num_detections"].tolist() == [1, 1, 1, 0]
    # data.label_offset: model class c is record label c + offset (past the names: the id)
    for offset, name in ((1, b"1"), (0, b"cat")):
        cfg = {**det_config, "data": {**det_config["data"], "label_offset": offset}}
        mod = DetectServingModule(_PaintedBoxFinder(), eval_preprocessing(cfg),
                                  ["person", "cat"])
        y = mod.predict_preprocessed(tf.ones([1, *SIZE, 3]))
        assert y["class_names"].numpy().tolist() == [[name]]


def _oracle_paste(mask: np.ndarray, box, h: int, w: int) -> np.ndarray:
    """Exact rationals: pixel (i, j) with its centre in the box reads cell
    floor((i + 1/2 - ymin) S / (ymax - ymin)) (and likewise j) of mask > 0.5."""
    from fractions import Fraction as F

    y0, x0, y1, x1 = (F(float(v)) for v in box)
    out = np.zeros((h, w), np.uint8)
    for i in range(h):
        for j in range(w):
            cy, cx = F(2 * i + 1, 2), F(2 * j + 1, 2)
            if y0 <= cy < y1 and x0 <= cx < x1:
                r = int((cy - y0) * mask.shape[0] / (y1 - y0) // 1)
                c = int((cx - x0) * mask.shape[1] / (x1 - x0) // 1)
                out[i, j] = mask[r, c] > 0.5
    return out


def test_paste_instance_masks_is_the_rational_oracle():
    """Integer boxes (every cell edge an exact tie), quarter-pixel boxes partly outside
    the image, non-square masks, an empty box."""
    from tfpipe.export import paste_instance_masks

    rng = np.random.default_rng(5)
    for t in range(40):
        h, w = (int(v) for v in rng.integers(3, 30, 2))
        sh, sw = (int(v) for v in rng.integers(2, 12, 2))
        if t % 2:
            ys, xs = np.sort(rng.integers(0, h + 1, 2)), np.sort(rng.integers(0, w + 1, 2))
        else:
            ys = np.sort(rng.integers(-8, 4 * h + 8, 2)) / 4
            xs = np.sort(rng.integers(-8, 4 * w + 8, 2)) / 4
        boxes = np.array([[ys[0], xs[0], ys[1], xs[1]], [5.0, 5.0, 5.0, 9.0]], np.float32)
        masks = rng.random((2, sh, sw)).astype(np.float32)
        got = paste_instance_masks(masks, boxes, (h, w))
        assert got.shape == (2, h, w) and got.dtype == np.uint8
        assert np.array_equal(got[0], _oracle_paste(masks[0], boxes[0], h, w)), t
        assert not got[1].any()  # zero height
    with pytest.raises(ValueError, match=r"masks \[N, S, S\] and boxes \[N, 4\]"):
        paste_instance_masks(np.zeros((2, 4, 4)), np.zeros((3, 4)), (8, 8))


def test_a_tuple_model_without_keypoints_or_masks(det_config, det_blobs, tmp_path):
    """(boxes, classes, scores) as a list, integer classes: exported and saved; the
    signature has no keypoints / masks outputs, num_detections is N for every image."""
    import keras

    from tfpipe.export import export_serving

    L = keras.layers
    inp = keras.Input((*SIZE, 3))
    x = L.GlobalAveragePooling2D()(inp)
    boxes = L.Reshape((N, 4))(L.Dense(N * 4, "sigmoid")(x))
    classes = L.Lambda(lambda t: keras.ops.cast(t > 0, "int32"))(L.Dense(N)(x))
    model = keras.Model(inp, [boxes, classes, L.Dense(N, "sigmoid")(x)])
    res = export_serving(det_config, model, tmp_path / "out", warmup=0, serving_config=False)
    assert sorted(res.signatures["serving_default"]["outputs"]) == [
        "boxes", "class_names", "classes", "image_size", "normalized_boxes",
        "num_detections", "scores"]
    fn = tf.saved_model.load(res.version_dir).signatures["serving_default"]
    got = fn(image_bytes=tf.constant(det_blobs[:2]))
    assert got["num_detections"].numpy().tolist() == [N, N]
    sizes = np.float32([_decoded_size(b) for b in det_blobs[:2]])
    np.testing.assert_array_equal(
        got["boxes"].numpy(), got["normalized_boxes"].numpy() * np.tile(sizes, 2)[:, None])
    names = np.array(["person", "cat"])[got["classes"].numpy()]
    assert np.array_equal(got["class_names"].numpy().astype(str), names)
