// tfpipe native CPU kernels (built by `python -m tfpipe.native build`).
//
// TfpipeResizeBilinearU8: uint8 [h, w, c] -> uint8 [H, W, c], exactly
//   saturate_cast<uint8>(round_half_even(tf.image.resize(image, [H, W], "bilinear")))
// i.e. TF's ResizeBilinear with half_pixel_centers=True, same float32 formula
// and evaluation order (lerp along x in each of the two source rows, then along
// y), so the result is bit-identical to the pure-TF path rather than a fixed-
// point approximation. Speed comes from doing it separably: the x indices and
// weights are computed once per call, each needed source row is x-interpolated
// once (and reused by neighbouring output rows when upscaling), and there is
// no float intermediate image or separate round/cast pass.
// Optional `flip` (scalar bool): mirror the output horizontally, the same as
// tf.reverse(resized, [1]) -- fused only because the pipeline flips AFTER the
// resize; it only changes where each output column is written.
//
// Single-threaded on purpose: it runs inside tf.data's parallel map (one image
// per call), and the result must not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <cstdint>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeResizeBilinearU8")
    .Input("image: uint8")
    .Input("size: int32")
    .Input("flip: bool")
    .Output("resized: uint8")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle image, hw, out;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &image));
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(1, &hw));
      TF_RETURN_IF_ERROR(c->WithRank(hw, 2, &hw));
      TF_RETURN_IF_ERROR(
          c->Concatenate(hw, c->Vector(c->Dim(image, 2)), &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Bilinear (half-pixel centres) resize of one uint8 HWC image, rounded half to
even and saturated back to uint8; bit-identical to tf.image.resize(bilinear,
antialias=False) + tf.round + tf.saturate_cast. flip mirrors the output columns.
)doc");

namespace {

struct Interp {
  int64_t lower;
  int64_t upper;
  float lerp;
};

// TF's compute_interpolation_weights with HalfPixelScaler, verbatim semantics.
void Weights(int64_t out_size, int64_t in_size, std::vector<Interp>* w) {
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  w->resize(out_size);
  for (int64_t i = 0; i < out_size; ++i) {
    const float in = (static_cast<float>(i) + 0.5f) * scale - 0.5f;
    const float in_f = std::floor(in);
    (*w)[i].lower = std::max(static_cast<int64_t>(in_f), static_cast<int64_t>(0));
    (*w)[i].upper = std::min(static_cast<int64_t>(std::ceil(in)), in_size - 1);
    (*w)[i].lerp = in - in_f;
  }
}

// x taps as flat arrays (byte offsets of the left/right source pixel, weight).
struct XTaps {
  std::vector<int64_t> l, r;
  std::vector<float> t;
};

// Hot loops are compiled twice (AVX2 and baseline x86-64) and picked once per
// process (UseAvx2), so the .so runs on any CPU the TF wheel runs on. No FMA
// either way (-ffp-contract=off and no "fma" target) and only elementwise float
// ops, so both versions give the same bits (the float rounding stays TF's).
// TFPIPE_NATIVE_ISA=baseline forces the baseline version: what a pre-AVX2 host
// runs (tests/pipeline/test_host_independence.py).
#if defined(__x86_64__) && defined(__GNUC__)
#define TFPIPE_DISPATCH 1
#define TFPIPE_AVX2 __attribute__((target("avx2")))
#endif
#define TFPIPE_BODY inline __attribute__((always_inline))

// One source row interpolated along x: dst[x*C + k] (float), TF's `top`/`bottom`.
template <int C>
TFPIPE_BODY void RowXBody(const uint8_t* __restrict src, const XTaps& xs, int64_t out_w,
                          int64_t channels, int64_t row_in, float* __restrict tmp,
                          float* __restrict dst) {
  const int64_t ch = C > 0 ? C : channels;
  // Widen the source row once (vectorized), then gather floats: cheaper than
  // converting both taps of every output value.
  for (int64_t i = 0; i < row_in; ++i) tmp[i] = static_cast<float>(src[i]);
  const int64_t* __restrict lo = xs.l.data();
  const int64_t* __restrict hi = xs.r.data();
  const float* __restrict tw = xs.t.data();
  for (int64_t x = 0; x < out_w; ++x) {
    const float* l = tmp + lo[x];
    const float* r = tmp + hi[x];
    const float t = tw[x];
    float* d = dst + x * ch;
    for (int64_t k = 0; k < ch; ++k) d[k] = l[k] + (r[k] - l[k]) * t;
  }
}

inline uint8_t RoundSaturate(float v) {
  // Round to nearest, ties to even (= tf.round) without a libm call: adding and
  // subtracting 1.5 * 2^23 leaves the integer part rounded by the FPU's default
  // mode, exact for |v| < 2^22 (our values are in [0, 255]). Kept by the
  // compiler because we build without -ffast-math.
  const float r = (v + 12582912.0f) - 12582912.0f;
  return static_cast<uint8_t>(static_cast<int>(r < 0.f ? 0.f : (r > 255.f ? 255.f : r)));
}

// Lerp along y and round/saturate: TF's `top + (bottom - top) * y_lerp`.
TFPIPE_BODY void RowYBody(const float* __restrict top, const float* __restrict bot, float t,
                          int64_t n, uint8_t* __restrict out) {
  for (int64_t i = 0; i < n; ++i) out[i] = RoundSaturate(top[i] + (bot[i] - top[i]) * t);
}

#ifdef TFPIPE_DISPATCH
template <int C>
TFPIPE_AVX2 void RowXAvx2(const uint8_t* src, const XTaps& xs, int64_t out_w, int64_t channels,
                          int64_t row_in, float* tmp, float* dst) {
  RowXBody<C>(src, xs, out_w, channels, row_in, tmp, dst);
}
TFPIPE_AVX2 void RowYAvx2(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
  RowYBody(top, bot, t, n, out);
}
template <int C>
void RowXBase(const uint8_t* src, const XTaps& xs, int64_t out_w, int64_t channels,
              int64_t row_in, float* tmp, float* dst) {
  RowXBody<C>(src, xs, out_w, channels, row_in, tmp, dst);
}
void RowYBase(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
  RowYBody(top, bot, t, n, out);
}
bool UseAvx2() {
  static const bool use = [] {
    const char* isa = std::getenv("TFPIPE_NATIVE_ISA");
    if (isa != nullptr && std::string(isa) == "baseline") return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return use;
}
#endif

template <int C>
void RowX(const uint8_t* src, const XTaps& xs, int64_t out_w, int64_t channels, int64_t row_in,
          float* tmp, float* dst) {
#ifdef TFPIPE_DISPATCH
  if (UseAvx2()) return RowXAvx2<C>(src, xs, out_w, channels, row_in, tmp, dst);
  return RowXBase<C>(src, xs, out_w, channels, row_in, tmp, dst);
#else
  RowXBody<C>(src, xs, out_w, channels, row_in, tmp, dst);
#endif
}

void RowY(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
#ifdef TFPIPE_DISPATCH
  if (UseAvx2()) return RowYAvx2(top, bot, t, n, out);
  return RowYBase(top, bot, t, n, out);
#else
  RowYBody(top, bot, t, n, out);
#endif
}

class ResizeBilinearU8Op : public OpKernel {
 public:
  explicit ResizeBilinearU8Op(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& image = ctx->input(0);
    const Tensor& size = ctx->input(1);
    const Tensor& flip_t = ctx->input(2);
    OP_REQUIRES(ctx, image.dims() == 3,
                errors::InvalidArgument("image must be [height, width, channels], got ",
                                        image.shape().DebugString()));
    OP_REQUIRES(ctx, size.dims() == 1 && size.NumElements() == 2,
                errors::InvalidArgument("size must be [2] (height, width), got ",
                                        size.shape().DebugString()));
    OP_REQUIRES(ctx, flip_t.dims() == 0,
                errors::InvalidArgument("flip must be a scalar bool"));
    const int64_t in_h = image.dim_size(0), in_w = image.dim_size(1),
                  channels = image.dim_size(2);
    const auto sz = size.vec<int32>();
    const int64_t out_h = sz(0), out_w = sz(1);
    const bool flip = flip_t.scalar<bool>()();
    OP_REQUIRES(ctx, out_h > 0 && out_w > 0,
                errors::InvalidArgument("size must be positive, got [", out_h, ", ",
                                        out_w, "]"));
    OP_REQUIRES(ctx, in_h > 0 && in_w > 0 && channels > 0,
                errors::InvalidArgument("image must be non-empty, got ",
                                        image.shape().DebugString()));

    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({out_h, out_w, channels}), &out));

    std::vector<Interp> xs, ys;
    Weights(out_w, in_w, &xs);
    Weights(out_h, in_h, &ys);
    if (flip) std::reverse(xs.begin(), xs.end());  // output column x <- source of W-1-x
    XTaps taps;
    for (const Interp& i : xs) {
      taps.l.push_back(i.lower * channels);
      taps.r.push_back(i.upper * channels);
      taps.t.push_back(i.lerp);
    }

    const uint8_t* src = image.flat<uint8>().data();
    uint8_t* dst = out->flat<uint8>().data();
    const int64_t row_in = in_w * channels, row_out = out_w * channels;
    // Two cached x-interpolated rows; `have[i]` = source row held in buf[i].
    std::vector<float> buf(2 * row_out), wide(row_in);
    float* rows[2] = {buf.data(), buf.data() + row_out};
    int64_t have[2] = {-1, -1};

    auto row_x = [&](int64_t y, float* d) {
      const uint8_t* s = src + y * row_in;
      switch (channels) {
        case 1: RowX<1>(s, taps, out_w, channels, row_in, wide.data(), d); break;
        case 3: RowX<3>(s, taps, out_w, channels, row_in, wide.data(), d); break;
        case 4: RowX<4>(s, taps, out_w, channels, row_in, wide.data(), d); break;
        default: RowX<0>(s, taps, out_w, channels, row_in, wide.data(), d);
      }
    };
    auto fetch = [&](int64_t y, int64_t other) -> const float* {
      // The x-interpolated source row y; on a miss, computed into the slot
      // that does not hold `other` (the second row this output row needs).
      if (have[0] == y) return rows[0];
      if (have[1] == y) return rows[1];
      const int slot = have[0] == other ? 1 : 0;
      row_x(y, rows[slot]);
      have[slot] = y;
      return rows[slot];
    };

    for (int64_t y = 0; y < out_h; ++y) {
      const Interp& iy = ys[y];
      const float* top = fetch(iy.lower, iy.upper);
      const float* bot = fetch(iy.upper, iy.lower);
      RowY(top, bot, iy.lerp, row_out, dst + y * row_out);
    }
  }
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeResizeBilinearU8").Device(DEVICE_CPU),
                        ResizeBilinearU8Op);
