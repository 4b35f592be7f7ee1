"""Graph-only augmentation ops: geometry (L2), boxes, pixel (L3), batch (L4).

Every random op takes a sample (or batch) seed, an int ``[2]`` tensor, and draws with
``tf.random.stateless_*`` only. Geometric ops return ``(image, matrix)``; see
docs/augment.md for the matrix and box conventions.
"""

from tfpipe.augment.boxes import FORMATS as BOX_FORMATS
from tfpipe.augment.boxes import convert as convert_boxes
from tfpipe.augment.boxes import filter_boxes, transform_boxes
from tfpipe.augment.detection import PAD_CLASS, detection_mixup, mosaic, pad_boxes
from tfpipe.augment.elastic import elastic, elastic_boxes, sample_elastic_field
from tfpipe.augment.geometry import (
    CROP_RATIO,
    CROP_SCALE,
    affine,
    apply_geometry,
    center_crop,
    center_crop_window,
    compose,
    crop_and_resize,
    crop_matrix,
    crop_window_draws,
    crop_window_from_draws,
    flip_matrix,
    identity_matrix,
    pad_and_crop,
    random_affine,
    random_flip,
    random_resized_crop,
    random_rot90,
    remap,
    resize_matrix,
    rot90_flip,
    rot90_matrix,
    rotation_matrix,
    sample_affine_matrices,
    sample_affine_matrix,
    sample_crop_window,
    scale_matrix,
    shear_matrix,
    translate_matrix,
)

__all__ = [
    "BOX_FORMATS", "CROP_RATIO", "CROP_SCALE", "affine", "apply_geometry", "center_crop",
    "center_crop_window", "compose",
    "convert_boxes", "crop_and_resize", "crop_matrix", "crop_window_draws",
    "crop_window_from_draws", "filter_boxes", "flip_matrix",
    "identity_matrix", "pad_and_crop", "random_affine", "random_flip", "random_resized_crop",
    "random_rot90", "remap", "resize_matrix", "rot90_flip", "rot90_matrix", "rotation_matrix",
    "sample_affine_matrices", "sample_affine_matrix", "sample_crop_window", "scale_matrix", "shear_matrix",
    "transform_boxes", "translate_matrix",
    # elastic
    "elastic", "elastic_boxes", "sample_elastic_field",
    # detection composition (L4)
    "PAD_CLASS", "detection_mixup", "mosaic", "pad_boxes",
]

# pixel (L3), RandAugment/TrivialAugment and classification batch ops (L4);
# docs/augment-pixel.md. Appended by the pixel owner: each module's __all__ is its public list.
from tfpipe.augment import batch as _batch  # noqa: E402
from tfpipe.augment import color as _color  # noqa: E402
from tfpipe.augment import pixel as _pixel  # noqa: E402
from tfpipe.augment import on_device as _on_device  # noqa: E402
from tfpipe.augment import policies as _policies  # noqa: E402
from tfpipe.augment.batch import *  # noqa: E402,F401,F403
from tfpipe.augment.color import *  # noqa: E402,F401,F403
from tfpipe.augment.pixel import *  # noqa: E402,F401,F403
from tfpipe.augment.policies import *  # noqa: E402,F401,F403
# the device half of `augment.pixel_stage: device` (docs/augment-pixel.md, "On-device pixel stage")
from tfpipe.augment.on_device import DeviceSpec, DeviceStage, OnDevice, apply_on_device  # noqa: E402,F401

# segmentation masks: the image's matrix, nearest, ignore fill (augment/masks.py)
from tfpipe.augment import masks as _masks  # noqa: E402
from tfpipe.augment.detection import (MosaicTile, mixup_partners, mosaic_draws,  # noqa: E402,F401
                                     mosaic_tiles)
from tfpipe.augment.masks import *  # noqa: E402,F401,F403

__all__ += [*_masks.__all__, "MosaicTile", "mixup_partners", "mosaic_draws", "mosaic_tiles"]
__all__ += [*_color.__all__, *_pixel.__all__, *_policies.__all__, *_batch.__all__,
            "DeviceSpec", "DeviceStage", "OnDevice", "apply_on_device"]

# instance masks: box crops at a fixed size through the same matrix (augment/instance_masks.py)
from tfpipe.augment import instance_masks as _instance_masks  # noqa: E402
from tfpipe.augment.instance_masks import *  # noqa: E402,F401,F403

__all__ += [*_instance_masks.__all__]

# keypoints: the image's matrix, visibility, the left/right swap (augment/keypoints.py)
from tfpipe.augment import keypoints as _keypoints  # noqa: E402
from tfpipe.augment.keypoints import *  # noqa: E402,F401,F403

__all__ += [*_keypoints.__all__]
