"""Op-type tables the rules share (names as they appear in a GraphDef)."""

from __future__ import annotations

PY_FUNC_OPS = frozenset({"EagerPyFunc", "PyFunc", "PyFuncStateless"})

# Ops that draw from a hidden, shared random state: their values depend on which
# thread got there first, so a parallel map cannot reproduce them.
STATEFUL_RANDOM_OPS = frozenset({
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
    "ParameterizedTruncatedNormal", "RandomShuffle", "RandomGamma", "Multinomial",
    "RandomPoisson", "RandomPoissonV2", "RandomCrop",
    # tf.random.Generator: every draw reads-and-advances one shared counter.
    "StatefulUniform", "StatefulUniformInt", "StatefulUniformFullInt",
    "StatefulStandardNormal", "StatefulStandardNormalV2", "StatefulTruncatedNormal",
    "StatefulRandomBinomial", "RngReadAndSkip", "RngSkip", "NonDeterministicInts",
    # tf.image.sample_distorted_bounding_box (what tf.image.random_crop-style code uses)
    "SampleDistortedBoundingBox", "SampleDistortedBoundingBoxV2",
})

_STATELESS_EXTRA = frozenset({
    "StatelessTruncatedNormal", "StatelessTruncatedNormalV2", "StatelessMultinomial",
    "StatelessParameterizedTruncatedNormal", "StatelessSampleDistortedBoundingBox",
    "StatelessShuffle", "RandomIndexShuffle",
})


# Draws that are not a TF random op by name: tfpipe's native ops that draw from a
# seed input inside C++, and the library functions of tfpipe.seeds' bit-identical
# Philox twin (`tfpipe_philox_<kind>_<calls>`, one per process, called by every
# draw site), whose body is plain integer ops. A function that calls one draws.
SEEDED_NATIVE_OPS = frozenset({"TfpipeNoise", "TfpipeElasticNoiseBlur"})
RANDOM_FUNCTION_MARK = "tfpipe_philox_"

# A frame walk that finds the intact records after framing damage (tfpipe's native
# TFRecord walk): a reader function holding one resynchronises where ignore_errors()
# would end the file.
RESYNC_READER_OPS = frozenset({"TfpipeTfrecordWalk"})


def is_stateless_random(op: str) -> bool:
    return (op.startswith("StatelessRandom") or op in _STATELESS_EXTRA
            or op in SEEDED_NATIVE_OPS)


def is_random(op: str) -> bool:
    return op in STATEFUL_RANDOM_OPS or is_stateless_random(op)


def draws_random(op: str, function: str) -> bool:
    """True for a random op, or any op of a Philox twin function (`function`: the
    library name of the function holding `op`, e.g. __inference_tfpipe_philox_int64_1_5)."""
    return is_random(op) or RANDOM_FUNCTION_MARK in function


# Ops that make a per-element function expensive however few of them there are.
HEAVY_OPS = frozenset({
    "DecodeJpeg", "DecodePng", "DecodeImage", "DecodeBmp", "DecodeGif", "DecodeWebP",
    "DecodeAndCropJpeg", "DecodeRaw", "DecodeCompressed", "EncodeJpeg", "EncodePng",
    "EncodeJpegVariableQuality", "ResizeBilinear", "ResizeBicubic", "ResizeArea",
    "ResizeNearestNeighbor", "ScaleAndTranslate", "CropAndResize",
    "ImageProjectiveTransformV2", "ImageProjectiveTransformV3", "AdjustContrastv2", "AdjustHue",
    "AdjustSaturation", "RGBToHSV", "HSVToRGB", "Conv2D", "DepthwiseConv2dNative",
    "ParseExampleV2", "ParseSingleExample", "ParseExample", "AudioSpectrogram", "Mfcc",
    "DecodeWav", "FFT", "FFT2D", "RFFT", "RFFT2D",
    # tfpipe's own native kernels (tfpipe.native) that touch every pixel; the two that
    # do not (TfpipeCropWindow: a window's arithmetic, TfpipeTfrecordWalk: a file's
    # framing) are not per-element work. tests/doctor/test_rule_details.py checks this
    # list against the ops the native sources register.
    "TfpipeResizeBilinearU8", "TfpipeAffineWarp", "TfpipeDecodeJpegStrict",
    "TfpipeDecodeCropResize", "TfpipeDecodeCropResizeBlock", "TfpipeElasticNoiseBlur",
    "TfpipeElasticRemap", "TfpipeMosaic", "TfpipeNoise", "TfpipePixelChain",
})
NATIVE_LIGHT_OPS = frozenset({"TfpipeCropWindow", "TfpipeTfrecordWalk"})

# Bookkeeping ops that cost nothing per element; not counted as "work".
TRIVIAL_OPS = frozenset({
    "Const", "Identity", "IdentityN", "NoOp", "Placeholder", "_Arg", "_Retval",
    "PartitionedCall", "StatefulPartitionedCall", "If", "StatelessIf", "While",
    "StatelessWhile", "Case", "StatelessCase",
})

PARSE_OPS = frozenset({"ParseExampleV2", "ParseSingleExample", "ParseExample"})

FILE_READER_OPS = frozenset({
    "TFRecordDataset", "TFRecordDatasetV2", "TextLineDataset", "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2",
})

MAP_OPS = frozenset({"MapDataset", "ParallelMapDataset", "ParallelMapDatasetV2"})
PARALLEL_MAP_OPS = frozenset({"ParallelMapDataset", "ParallelMapDatasetV2", "MapAndBatchDataset"})
INTERLEAVE_OPS = frozenset({"InterleaveDataset"})
PARALLEL_INTERLEAVE_OPS = frozenset({
    "ParallelInterleaveDataset", "ParallelInterleaveDatasetV2", "ParallelInterleaveDatasetV3",
    "ParallelInterleaveDatasetV4", "LegacyParallelInterleaveDatasetV2",
})
SHUFFLE_OPS = frozenset({
    "ShuffleDataset", "ShuffleDatasetV2", "ShuffleDatasetV3", "ShuffleAndRepeatDataset",
    "ShuffleAndRepeatDatasetV2",
})
BATCH_OPS = frozenset({
    "BatchDataset", "BatchDatasetV2", "PaddedBatchDataset", "PaddedBatchDatasetV2",
    "ParallelBatchDataset", "MapAndBatchDataset", "DenseToSparseBatchDataset",
    "RaggedBatchDataset",
})
UNBATCH_OPS = frozenset({"UnbatchDataset", "RebatchDataset", "RebatchDatasetV2"})
CACHE_OPS = frozenset({"CacheDataset", "CacheDatasetV2"})
REPEAT_OPS = frozenset({"RepeatDataset", "ShuffleAndRepeatDataset", "ShuffleAndRepeatDatasetV2"})
PREFETCH_OPS = frozenset({"PrefetchDataset"})

# Ops tf.data itself appends or that do no per-element work: a prefetch may sit
# before them and still be "last" (the same list tf.data's inject_prefetch skips,
# plus the bookkeeping of assert_cardinality / take).
FREE_TAIL_OPS = frozenset({
    "OptionsDataset", "ModelDataset", "OptimizeDataset", "OptimizeDatasetV2",
    "MaxIntraOpParallelismDataset", "ExperimentalMaxIntraOpParallelismDataset",
    "PrivateThreadPoolDataset", "ExperimentalPrivateThreadPoolDataset",
    "AssertCardinalityDataset", "AssertNextDataset", "ExperimentalAssertNextDataset",
    "AssertPrevDataset", "NonSerializableDataset", "ExperimentalNonSerializableDataset",
    "SetStatsAggregatorDataset", "TakeDataset", "FinalizeDataset",
})
