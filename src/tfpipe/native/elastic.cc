// Elastic warp kernels, bit-identical to their pure-TF twins in
// tfpipe.augment.elastic / tfpipe.augment.geometry.remap:
//
// TfpipeElasticNoiseBlur(seed [2], size [2] = (H, W), taps) -> field [H - n + 1, W - n + 1, 2]
//   the twin: noise = tf.random.stateless_uniform([1, H, W, 2], seed, -1, 1, philox)
//   then `_blur_valid` along rows, then along columns (n = len(taps)).
//   - the uniforms are TF's own: seed scrambled into (key, counter) exactly as TF's
//     stateless ops (see noise.cc), tsl::random::UniformDistribution<PhiloxRandom,
//     float> (4 per generator call, element j from call j / 4), then the twin's
//     `rnd * (max - min) + min` as two float32 operations;
//   - the blur is the twin's sum in the twin's order: acc = x_0 * t_0, then
//     acc = acc + x_k * t_k for k = 1..n-1, every product and sum rounded to float32
//     (no FMA: the build has -ffp-contract=off and no -march).
//
// TfpipeElasticRemap(image [H,W,C] uint8|float, field [H,W,2]) -> image
//   the twin: px = x + dx, py = y + dy, then `remap` (bilinear or nearest; fill
//   constant / reflect / wrap / nearest): the same index folding, the same
//   (1 - t) weights and products and sums in the same order, uint8 rounded half
//   to even and saturated.
//
// One image per call (the pipeline's L2 runs per sample inside a parallel map),
// computed by one thread in a fixed order: host- and thread-count-independent.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/random/philox_random.h"
#include "tensorflow/core/lib/random/random_distributions.h"

#include "common.h"  // Philox seeding, uint8 rounding (shared with the other kernels)

namespace tfpipe_elastic {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using Philox = tfpipe_common::Philox;
using tfpipe_common::PhiloxFromSeed;
using Uniform = tensorflow::random::UniformDistribution<Philox, float>;

REGISTER_OP("TfpipeElasticNoiseBlur")
    .Input("seed: int64")
    .Input("size: int32")
    .Attr("taps: list(float) >= 1")
    .Output("field: float")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      c->set_output(0, c->MakeShape({c->UnknownDim(), c->UnknownDim(), 2}));
      return absl::OkStatus();
    })
    .Doc(R"doc(
U(-1, 1) noise [H, W, 2] from stateless_uniform(seed, philox), blurred VALID by
the separable `taps` along rows then columns: [H - n + 1, W - n + 1, 2].
)doc");

REGISTER_OP("TfpipeElasticRemap")
    .Input("image: T")
    .Input("field: float")
    .Input("fill_value: float")
    .Attr("T: {uint8, float}")
    .Attr("interpolation: {'nearest', 'bilinear'}")
    .Attr("fill_mode: {'constant', 'reflect', 'wrap', 'nearest'}")
    .Output("out: T")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle image;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &image));
      c->set_output(0, image);
      return absl::OkStatus();
    })
    .Doc(R"doc(
out(y, x) = image(y + field[y, x, 1], x + field[y, x, 0]), sampled like
tfpipe.augment.geometry.remap.
)doc");

// dst[e] = src[e] * t_0, then dst[e] = dst[e] + src[e + k * stride] * t_k for
// k = 1..n-1 (every product and sum rounded to float32, in that order), e < count.
// The order per element is the twin's; the loop keeps 16 elements in registers
// across the taps instead of reloading dst per tap (same values, ~2x fewer
// memory operations).
inline void BlurLine(const float* src, int64_t stride, int64_t count,
                     const std::vector<float>& taps, float* dst) {
  const int64_t n = static_cast<int64_t>(taps.size());
  int64_t e = 0;
#if defined(__SSE2__)
  for (; e + 16 <= count; e += 16) {
    const float* s = src + e;
    __m128 t = _mm_set1_ps(taps[0]);
    __m128 a0 = _mm_mul_ps(_mm_loadu_ps(s), t), a1 = _mm_mul_ps(_mm_loadu_ps(s + 4), t);
    __m128 a2 = _mm_mul_ps(_mm_loadu_ps(s + 8), t), a3 = _mm_mul_ps(_mm_loadu_ps(s + 12), t);
    for (int64_t k = 1; k < n; ++k) {
      s += stride;
      t = _mm_set1_ps(taps[k]);
      a0 = _mm_add_ps(a0, _mm_mul_ps(_mm_loadu_ps(s), t));
      a1 = _mm_add_ps(a1, _mm_mul_ps(_mm_loadu_ps(s + 4), t));
      a2 = _mm_add_ps(a2, _mm_mul_ps(_mm_loadu_ps(s + 8), t));
      a3 = _mm_add_ps(a3, _mm_mul_ps(_mm_loadu_ps(s + 12), t));
    }
    _mm_storeu_ps(dst + e, a0);
    _mm_storeu_ps(dst + e + 4, a1);
    _mm_storeu_ps(dst + e + 8, a2);
    _mm_storeu_ps(dst + e + 12, a3);
  }
#endif
  for (; e < count; ++e) {
    const float* s = src + e;
    float acc = s[0] * taps[0];
    for (int64_t k = 1; k < n; ++k) {
      const float term = s[k * stride] * taps[k];
      acc = acc + term;
    }
    dst[e] = acc;
  }
}

class NoiseBlurOp : public OpKernel {
 public:
  explicit NoiseBlurOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("taps", &taps_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& seed = ctx->input(0);
    const Tensor& size = ctx->input(1);
    OP_REQUIRES(ctx, seed.NumElements() == 2 && size.NumElements() == 2,
                InvalidArgument("seed and size must have 2 elements, got ",
                                seed.shape().DebugString(), " and ", size.shape().DebugString()));
    const int64_t H = size.flat<int32_t>()(0), W = size.flat<int32_t>()(1);
    const int64_t n = static_cast<int64_t>(taps_.size());
    OP_REQUIRES(ctx, H >= n && W >= n,
                InvalidArgument("noise size (", H, ", ", W, ") smaller than the ", n, " taps"));
    const int64_t oh = H - n + 1, ow = W - n + 1;
    // noise [H, W, 2], the twin's element order
    const int64_t total = H * W * 2;
    std::vector<float> noise(total);
    Philox gen = PhiloxFromSeed(seed.flat<int64_t>()(0), seed.flat<int64_t>()(1));
    Uniform uniform;
    const float range = 1.0f - (-1.0f), lo = -1.0f;
    for (int64_t j = 0; j < total; j += Uniform::kResultElementCount) {
      const Uniform::ResultType r = uniform(&gen);
      const int64_t m = std::min<int64_t>(Uniform::kResultElementCount, total - j);
      for (int64_t k = 0; k < m; ++k) {
        const float scaled = r[k] * range;
        noise[j + k] = scaled + lo;
      }
    }
    // rows: rows[y][x][c] over y < oh, full width
    const int64_t row = W * 2;
    std::vector<float> rows(oh * row);
    for (int64_t y = 0; y < oh; ++y) {
      BlurLine(noise.data() + y * row, row, row, taps_, rows.data() + y * row);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({oh, ow, 2}), &out));
    float* dst = out->flat<float>().data();
    // columns: element (x, c) of a row takes src elements (x + k, c), k = 0..n-1
    for (int64_t y = 0; y < oh; ++y) {
      BlurLine(rows.data() + y * row, 2, ow * 2, taps_, dst + y * ow * 2);
    }
  }

 private:
  std::vector<float> taps_;
};

enum class Fill { kConstant, kReflect, kWrap, kNearest };

// geometry._fold_index: the source index for i in [0, n) and whether i was inside
inline int64_t Fold(int64_t i, int64_t n, Fill mode) {
  if (i >= 0 && i < n) return i;  // every mode: inside is itself (no division)
  switch (mode) {
    case Fill::kWrap: {
      int64_t j = i % n;
      return j < 0 ? j + n : j;
    }
    case Fill::kReflect: {
      const int64_t p = 2 * n;
      int64_t j = i % p;
      if (j < 0) j += p;
      return j >= n ? p - 1 - j : j;
    }
    default:
      return i < 0 ? 0 : (i > n - 1 ? n - 1 : i);
  }
}

// std::floor, inline: without SSE4.1 (the build has no -march) it is a libm call
// per coordinate. Exact: below 2^23 in magnitude the truncation is representable;
// integral values (and -0, inf, NaN) are returned as they are, as floor does.
inline float Floor(float v) {
  if (!(std::fabs(v) < 8388608.0f)) return v;
  const float t = static_cast<float>(static_cast<int32_t>(v));  // toward zero
  if (t == v) return v;
  return t > v ? t - 1.0f : t;
}

template <typename T>
class RemapOp : public OpKernel {
 public:
  explicit RemapOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string interp, fill;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("interpolation", &interp));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fill_mode", &fill));
    bilinear_ = interp == "bilinear";
    mode_ = fill == "constant" ? Fill::kConstant
            : fill == "reflect" ? Fill::kReflect
            : fill == "wrap"    ? Fill::kWrap
                                : Fill::kNearest;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& image = ctx->input(0);
    const Tensor& field = ctx->input(1);
    OP_REQUIRES(ctx, image.dims() == 3,
                InvalidArgument("image must be [H,W,C], got ", image.shape().DebugString()));
    const int64_t h = image.dim_size(0), w = image.dim_size(1), c = image.dim_size(2);
    OP_REQUIRES(ctx, field.dims() == 3 && field.dim_size(0) == h && field.dim_size(1) == w &&
                         field.dim_size(2) == 2,
                InvalidArgument("field must be [", h, ", ", w, ", 2], got ",
                                field.shape().DebugString()));
    const float fill = ctx->input(2).scalar<float>()();
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, image.shape(), &out));
    if (h == 0 || w == 0 || c == 0) return;
    const T* src = image.flat<T>().data();
    const float* f = field.flat<float>().data();
    T* dst = out->flat<T>().data();
    const bool constant = mode_ == Fill::kConstant;
    // the twin's tap(): the element offset of (yi, xi) after folding, or -1 where
    // a constant fill replaces it; then per channel a gather as float32
    auto offset = [&](int64_t yi, int64_t xi) -> int64_t {
      if (constant && (yi < 0 || yi >= h || xi < 0 || xi >= w)) return -1;
      return (Fold(yi, h, mode_) * w + Fold(xi, w, mode_)) * c;
    };
    auto tap = [&](int64_t off, int64_t ch) -> float {
      return off < 0 ? fill : static_cast<float>(src[off + ch]);
    };
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        const float* d = f + (y * w + x) * 2;
        const float px = static_cast<float>(x) + d[0];
        const float py = static_cast<float>(y) + d[1];
        T* o = dst + (y * w + x) * c;
        if (!bilinear_) {
          const int64_t yi = static_cast<int64_t>(static_cast<int32_t>(std::nearbyint(py)));
          const int64_t xi = static_cast<int64_t>(static_cast<int32_t>(std::nearbyint(px)));
          const int64_t off = offset(yi, xi);
          for (int64_t ch = 0; ch < c; ++ch) o[ch] = Store(tap(off, ch));
          continue;
        }
        const float x0f = Floor(px), y0f = Floor(py);
        const float tx = px - x0f, ty = py - y0f;
        const float ux = 1.0f - tx, uy = 1.0f - ty;
        const int64_t x0 = static_cast<int32_t>(x0f), y0 = static_cast<int32_t>(y0f);
        if (x0 >= 0 && x0 + 1 < w && y0 >= 0 && y0 + 1 < h) {
          // interior: every fill mode folds an inside index to itself, so the taps
          // are plain reads; the same products and sums as below, in the same order
          const T* p00 = src + (y0 * w + x0) * c;
          const T* p10 = p00 + w * c;
#if defined(__SSE2__)
          if (c == 3) {
            Interior3(p00, p10, ux, tx, uy, ty, o);
            continue;
          }
#endif
          for (int64_t ch = 0; ch < c; ++ch) {
            const float a = static_cast<float>(p00[ch]) * ux;
            const float b = static_cast<float>(p00[c + ch]) * tx;
            const float top = a + b;
            const float e = static_cast<float>(p10[ch]) * ux;
            const float g = static_cast<float>(p10[c + ch]) * tx;
            const float bot = e + g;
            const float p = top * uy, q = bot * ty;
            o[ch] = Store(p + q);
          }
          continue;
        }
        const int64_t o00 = offset(y0, x0), o01 = offset(y0, x0 + 1);
        const int64_t o10 = offset(y0 + 1, x0), o11 = offset(y0 + 1, x0 + 1);
        for (int64_t ch = 0; ch < c; ++ch) {
          const float a = tap(o00, ch) * ux, b = tap(o01, ch) * tx;
          const float top = a + b;
          const float e = tap(o10, ch) * ux, g = tap(o11, ch) * tx;
          const float bot = e + g;
          const float p = top * uy, q = bot * ty;
          o[ch] = Store(p + q);
        }
      }
    }
  }

 private:
#if defined(__SSE2__)
  // The interior bilinear pixel of 3 channels on 4 float lanes (the 4th is
  // dropped): lane-wise IEEE mul/add, the scalar path's operations in its order.
  static inline __m128 Load3(const uint8_t* p) {
    const uint32_t u = p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16);
    const __m128i zero = _mm_setzero_si128();
    const __m128i i = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(u)), zero);
    return _mm_cvtepi32_ps(_mm_unpacklo_epi16(i, zero));
  }
  static inline __m128 Load3(const float* p) { return _mm_setr_ps(p[0], p[1], p[2], 0.0f); }
  static inline void Store3(__m128 v, uint8_t* o) {
    // Store() on 4 lanes
    alignas(16) float r[4];
    _mm_store_ps(r, tfpipe_common::RoundSaturate4(v));
    o[0] = static_cast<uint8_t>(r[0]);
    o[1] = static_cast<uint8_t>(r[1]);
    o[2] = static_cast<uint8_t>(r[2]);
  }
  static inline void Store3(__m128 v, float* o) {
    alignas(16) float r[4];
    _mm_store_ps(r, v);
    o[0] = r[0], o[1] = r[1], o[2] = r[2];
  }
  static inline void Interior3(const T* p00, const T* p10, float ux, float tx, float uy,
                               float ty, T* o) {
    const __m128 vux = _mm_set1_ps(ux), vtx = _mm_set1_ps(tx);
    const __m128 top = _mm_add_ps(_mm_mul_ps(Load3(p00), vux), _mm_mul_ps(Load3(p00 + 3), vtx));
    const __m128 bot = _mm_add_ps(_mm_mul_ps(Load3(p10), vux), _mm_mul_ps(Load3(p10 + 3), vtx));
    Store3(_mm_add_ps(_mm_mul_ps(top, _mm_set1_ps(uy)), _mm_mul_ps(bot, _mm_set1_ps(ty))), o);
  }
#endif

  static T Store(float v) {
    if constexpr (std::is_same<T, uint8_t>::value) {
      return tfpipe_common::RoundSaturateU8(v);  // tf.round then saturate_cast
    } else {
      return v;
    }
  }

  bool bilinear_ = true;
  Fill mode_ = Fill::kReflect;
};

REGISTER_KERNEL_BUILDER(Name("TfpipeElasticNoiseBlur").Device(tensorflow::DEVICE_CPU),
                        NoiseBlurOp);
REGISTER_KERNEL_BUILDER(
    Name("TfpipeElasticRemap").Device(tensorflow::DEVICE_CPU).TypeConstraint<uint8_t>("T"),
    RemapOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("TfpipeElasticRemap").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    RemapOp<float>);

}  // namespace tfpipe_elastic
