// TfpipeDecodeCropResize: the train path's L1 + first two L2 ops of one JPEG in
// one kernel -- header size, random-resized-crop window from its planned draws,
// strict decode of only that window (at the DCT reduction data.dct_scaling
// picks), bilinear resize to the output size, horizontal flip.
//
// It is the composition the pipeline otherwise runs as ~8 ops per sample
// (extract_jpeg_shape, TfpipeCropWindow, stack, TfpipeDecodeJpegStrict,
// TfpipeResizeBilinearU8, ...), built from the very same functions, so its
// bytes are theirs (tests/native/test_window_decode.py checks it against both
// the native and the pure-TF composition):
//   - the size: tensorflow::jpeg::GetImageInfo (what extract_jpeg_shape calls);
//   - the window: RrcWindow (window.cc, = augment.crop_window_from_draws);
//   - the decode: ScanJpegStructure + jpeg::Uncompress with the strict op's
//     flags and its DctRatio mapping (jpeg_strict.cc);
//   - the resize: ResizeBilinearU8Into (ops.cc, = tf.image.resize bilinear,
//     rounded and saturated), with the flip folded into the x taps.
// One departure from the strict op's call, which changes no byte: where the
// marker walk shows a single-scan sequential JPEG, Uncompress is asked for the
// window widened left to the iMCU column libjpeg decodes from anyway
// (CropAlign / AlignCropLeft, jpeg_strict.cc), so TF decodes each row straight
// into the scratch buffer instead of into a temporary row plus a shifted
// memcpy, and the resize reads the window out of the wider rows (offset +
// stride). The `aligned_crop: false` attr (tfpipe.native.jpeg.unaligned_crop(),
// for benchmarks and the equality test) asks for the window itself, as before.
// Those helpers live in the other sources' anonymous namespaces: the build
// compiles every source as ONE translation unit in name order
// (tfpipe.native.build), and this file's name sorts after theirs.

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/jpeg/jpeg_mem.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeDecodeCropResize")
    .Input("contents: string")
    .Input("draws: float")
    .Input("crop_on: bool")
    .Input("flip: bool")
    .Input("size: int32")
    .Attr("ratio: list(float)")
    .Attr("channels: int = 3")
    .Attr("dct_scaling: bool = true")
    .Attr("aligned_crop: bool = true")
    .Attr("isa: {'native', 'baseline'} = 'native'")
    .Output("image: uint8")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle hw, out;
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(4, &hw));
      TF_RETURN_IF_ERROR(c->WithRank(hw, 2, &hw));
      int channels;
      TF_RETURN_IF_ERROR(c->GetAttr("channels", &channels));
      TF_RETURN_IF_ERROR(c->Concatenate(hw, c->Vector(channels), &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc(R"doc(
One JPEG -> uint8 [size[0], size[1], channels]: header size, the random-resized-
crop window of `draws` [4, attempts] (the whole image when crop_on is false),
strict decode of that window (DCT-scaled towards `size` when dct_scaling),
bilinear resize, mirrored when flip. Bit-identical to the composition of
extract_jpeg_shape, TfpipeCropWindow, TfpipeDecodeJpegStrict and
TfpipeResizeBilinearU8.
)doc");

namespace {

using GetImageInfoFn = bool (*)(const void*, int, int*, int*, int*);

// tensorflow::jpeg::GetImageInfo(const void*, int, int*, int*, int*), looked up
// like Uncompress (jpeg_strict.cc): exported by libtensorflow_cc only.
GetImageInfoFn LookupGetImageInfo() {
  static std::once_flag once;
  static GetImageInfoFn fn = nullptr;
  std::call_once(once, [] {
    constexpr char kSymbol[] = "_ZN10tensorflow4jpeg12GetImageInfoEPKviPiS3_S3_";
    for (const char* lib : {"libtensorflow_cc.so.2", "libtensorflow_framework.so.2"}) {
      void* handle = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
      if (handle == nullptr) continue;
      fn = reinterpret_cast<GetImageInfoFn>(dlsym(handle, kSymbol));
      if (fn != nullptr) return;
    }
    fn = reinterpret_cast<GetImageInfoFn>(dlsym(RTLD_DEFAULT, kSymbol));
  });
  return fn;
}

// Whether the fused kernels widen a crop to its iMCU column (see the header): the
// kernel's `aligned_crop` attr (default true). Read by each kernel's constructor.
bool AlignedCropAttr(OpKernelConstruction* ctx) {
  bool aligned = true;
  if (ctx->HasAttr("aligned_crop")) {
    const absl::Status st = ctx->GetAttr("aligned_crop", &aligned);
    if (!st.ok()) ctx->CtxFailure(__FILE__, __LINE__, st);
  }
  return aligned;
}

class DecodeCropResizeOp : public OpKernel {
 public:
  explicit DecodeCropResizeOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), baseline_(IsaBaselineAttr(ctx)) {
    std::vector<float> ratio;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ratio", &ratio));
    OP_REQUIRES(ctx, ratio.size() == 2 && ratio[0] > 0.0f && ratio[0] <= ratio[1],
                errors::InvalidArgument("ratio must be (low, high) with 0 < low <= high"));
    r_lo_ = ratio[0];
    r_hi_ = ratio[1];
    OP_REQUIRES_OK(ctx, ctx->GetAttr("channels", &channels_));
    OP_REQUIRES(ctx, channels_ == 1 || channels_ == 3,
                errors::InvalidArgument("channels must be 1 or 3, got ", channels_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dct_scaling", &dct_));
    aligned_ = AlignedCropAttr(ctx);
    std::string why;
    OP_REQUIRES(ctx, LookupUncompress(&why) != nullptr, errors::Unavailable(why));
    OP_REQUIRES(ctx, LookupGetImageInfo() != nullptr,
                errors::Unavailable("tensorflow::jpeg::GetImageInfo not found in the loaded "
                                    "TF libraries"));
  }

  void Compute(OpKernelContext* ctx) override;

 private:
  const bool baseline_;
  float r_lo_ = 0.0f, r_hi_ = 0.0f;
  int channels_ = 3;
  bool dct_ = true;
  bool aligned_ = true;
};

// Where a row's decoded window goes before the resize: a per-thread buffer that
// grows to the largest crop seen and is reused (no allocation per image; one
// larger than kKeepBytes is freed after its row, so a 12 MP outlier does not
// stay resident on every worker thread).
struct DecodeScratch {
  static constexpr size_t kKeepBytes = size_t{8} << 20;
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;

  uint8_t* Get(size_t bytes) {
    if (bytes > capacity) {
      data.reset(new (std::nothrow) uint8_t[bytes]);  // uninitialized: libjpeg fills it
      capacity = data != nullptr ? bytes : 0;
    }
    return data.get();
  }
  void Trim() {
    if (capacity > kKeepBytes) {
      data.reset();
      capacity = 0;
    }
  }
};

DecodeScratch& ThreadScratch() {
  thread_local DecodeScratch scratch;
  return scratch;
}

// What one row is: the window rule (kRowRrc: the random-resized-crop window of
// `draws` [4, attempts]; kRowWhole: the whole image; kRowCenter: the eval
// centre crop) and the output.
enum RowMode : int { kRowRrc = 0, kRowWhole = 1, kRowCenter = 2 };

struct RowSpec {
  float r_lo = 0.0f, r_hi = 0.0f;  // ratio attr (kRowRrc)
  float crop_fraction = 0.875f;    // kRowCenter
  int channels = 3;
  bool dct = true;
  bool aligned = true;  // widen the crop to its iMCU column (AlignedCropAttr)
  int64_t out_h = 0, out_w = 0;
};

// floor division of int64 (Python's //): (h - ch) // 2 can be negative only for
// degenerate sizes, where TF floors.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// augment.center_crop_window(h, w, (out_h, out_w), crop_fraction), the same
// float32 operations in the same order: fit = min(hf / oh, wf / ow) *
// crop_fraction, round half to even (nearbyint in the default mode = tf.round),
// truncating int32 cast, clip_by_value = max(min(v, h), 1), offsets floored.
void CenterWindow(int32_t h, int32_t w, int64_t out_h, int64_t out_w, float crop_fraction,
                  int32_t out[4]) {
  const float hf = static_cast<float>(h), wf = static_cast<float>(w);
  const float oh = static_cast<float>(out_h), ow = static_cast<float>(out_w);
  const float a = hf / oh, b = wf / ow;
  const float fit = (a < b ? a : b) * crop_fraction;
  int32_t ch = RoundI32(oh * fit), cw = RoundI32(ow * fit);
  ch = std::max(std::min(ch, h), int32_t{1});
  cw = std::max(std::min(cw, w), int32_t{1});
  out[0] = static_cast<int32_t>(FloorDiv(static_cast<int64_t>(h) - ch, 2));
  out[1] = static_cast<int32_t>(FloorDiv(static_cast<int64_t>(w) - cw, 2));
  out[2] = ch;
  out[3] = cw;
}

// One JPEG -> out (uint8 [out_h, out_w, channels], caller-owned): header size,
// the row's window, strict decode of the window (DCT-scaled towards the output
// with spec.dct) into the calling thread's scratch, bilinear resize, mirrored
// when flip. The whole of TfpipeDecodeCropResize and of one row of
// TfpipeDecodeCropResizeBlock (window_decode_block.cc); an error is the per-
// sample op's InvalidArgument, and `out` is then untouched.
Status DecodeCropResizeRow(const tstring& input, const float* draws, int64_t attempts,
                           RowMode mode, bool flip, const RowSpec& spec, uint8_t* out) {
  if (input.size() > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return errors::InvalidArgument("JPEG contents are too large");
  }
  const int n = static_cast<int>(input.size());

  // extract_jpeg_shape's error for a header it cannot read
  int w = 0, h = 0, comps = 0;
  if (!LookupGetImageInfo()(input.data(), n, &w, &h, &comps)) {
    return errors::InvalidArgument("Invalid JPEG data or crop window, data size ", n);
  }
  int32_t win[4] = {0, 0, h, w};
  if (mode == kRowRrc) {
    RrcWindow(draws, attempts, h, w, spec.r_lo, spec.r_hi, win);
  } else if (mode == kRowCenter) {
    CenterWindow(h, w, spec.out_h, spec.out_w, spec.crop_fraction, win);
  }

  jpeg::UncompressFlags flags;  // TfpipeDecodeJpegStrict's, crop = true
  flags.components = spec.channels;
  flags.ratio = 1;
  flags.fancy_upscaling = true;
  flags.try_recover_truncated_jpeg = false;
  flags.min_acceptable_fraction = 1.0f;
  flags.dct_method = JDCT_IFAST;
  flags.crop = true;
  flags.crop_y = win[0];
  flags.crop_x = win[1];
  flags.crop_height = win[2];
  flags.crop_width = win[3];
  const int r = spec.dct ? DctRatio(win[2], win[3], spec.out_h, spec.out_w) : 1;
  if (r > 1) ScaleCropFlags(r, &flags);
  JpegFrame frame;
  const std::string structure =
      ScanJpegStructure(reinterpret_cast<const uint8_t*>(input.data()), input.size(), &frame);
  if (!structure.empty()) return errors::InvalidArgument("damaged JPEG: ", structure);
  // the window starts `shift` columns into each decoded row (0: not widened)
  const int64_t scaled_w = (static_cast<int64_t>(w) + r - 1) / r;  // libjpeg's output_width
  const int64_t shift =
      spec.aligned ? AlignCropLeft(CropAlign(frame, r), scaled_w, &flags) : 0;

  DecodeScratch& scratch = ThreadScratch();
  int64_t crop_h = 0, crop_w = 0, crop_c = 0;
  bool out_of_memory = false;
  int64_t nwarn = 0;
  uint8_t* buffer = LookupUncompress(nullptr)(
      input.data(), n, flags, &nwarn, [&](int cw, int ch, int c) -> uint8_t* {
        crop_h = ch;
        crop_w = cw;
        crop_c = c;
        uint8_t* p = scratch.Get(static_cast<size_t>(ch) * cw * c);
        out_of_memory = p == nullptr;
        return p;
      });
  Status status;
  if (out_of_memory) {
    status = errors::ResourceExhausted("out of memory for a ", crop_h, "x", crop_w,
                                       " JPEG window");
  } else if (buffer == nullptr) {
    status = errors::InvalidArgument("jpeg::Uncompress failed. Invalid JPEG data or crop "
                                     "window.");
  } else if (nwarn != 0) {
    status = errors::InvalidArgument("damaged JPEG: libjpeg reported ", nwarn,
                                     " warning(s) (corrupt entropy-coded data, e.g. "
                                     "\"premature end of data segment\"); the decoded "
                                     "image would be partly gray");
  } else {
    // the original window: columns [shift, crop_w) of each decoded row
    ResizeBilinearU8Into(buffer + shift * crop_c, crop_h, crop_w - shift, crop_c, spec.out_h,
                         spec.out_w, flip, out, crop_w * crop_c);
  }
  scratch.Trim();
  return status;
}

void DecodeCropResizeOp::Compute(OpKernelContext* ctx) {
  IsaScope isa(baseline_);  // ops.cc: the resize's loops
  const Tensor& contents = ctx->input(0);
  const Tensor& draws = ctx->input(1);
  const Tensor& size = ctx->input(4);
  OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(contents.shape()) &&
                       TensorShapeUtils::IsScalar(ctx->input(2).shape()) &&
                       TensorShapeUtils::IsScalar(ctx->input(3).shape()),
              errors::InvalidArgument("contents, crop_on and flip must be scalars"));
  OP_REQUIRES(ctx, draws.dims() == 2 && draws.dim_size(0) == 4 && draws.dim_size(1) > 0,
              errors::InvalidArgument("draws must be float32 [4, attempts], got ",
                                      draws.shape().DebugString()));
  OP_REQUIRES(ctx, size.dims() == 1 && size.NumElements() == 2,
              errors::InvalidArgument("size must be [2] (height, width)"));
  RowSpec spec;
  spec.r_lo = r_lo_;
  spec.r_hi = r_hi_;
  spec.channels = channels_;
  spec.dct = dct_;
  spec.aligned = aligned_;
  spec.out_h = size.vec<int32>()(0);
  spec.out_w = size.vec<int32>()(1);
  OP_REQUIRES(ctx, spec.out_h > 0 && spec.out_w > 0,
              errors::InvalidArgument("size must be positive"));
  Tensor* out = nullptr;
  OP_REQUIRES_OK(ctx, ctx->allocate_output(
                          0, TensorShape({spec.out_h, spec.out_w, channels_}), &out));
  const RowMode mode = ctx->input(2).scalar<bool>()() ? kRowRrc : kRowWhole;
  OP_REQUIRES_OK(ctx, DecodeCropResizeRow(contents.scalar<tstring>()(),
                                          draws.flat<float>().data(), draws.dim_size(1),
                                          mode, ctx->input(3).scalar<bool>()(), spec,
                                          out->flat<uint8>().data()));
}

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeDecodeCropResize").Device(DEVICE_CPU), DecodeCropResizeOp);
