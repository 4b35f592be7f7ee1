// TfpipePixelChain: the pipeline's batched colour chain (brightness, contrast,
// saturation, in config order) + normalize, in one op, bit-identical to its
// pure-TF twin (tfpipe.pipeline.fast.FusedPixel without the native library:
// the plain tfpipe.augment.color kernels) on every host.
//
// Why bit-identical and host-independent:
// - every float result is one IEEE operation of the twin, in the twin's order
//   ((y - m) * f + m, v - r * (v - c), x * a - b, ...): elementwise IEEE float
//   ops give the same bits at any vector width; the build has no -march and
//   -ffp-contract=off (build.py), so no FMA changes a rounding;
// - the only reduction, contrast's per-image channel mean, is either an exact
//   integer sum (uint8 levels: int64, divided in double, rounded once to float)
//   or, for a float intermediate, the pairwise halving tree of
//   color._pairwise_sum (pad to a power of two with zeros, add the upper half
//   to the lower half until one value is left): the same pairs added in the
//   same order in both;
// - tf.round is round half to even (RoundEven below, no libm call);
// - threads: a batch is sharded over the CPU worker pool by whole images, and
//   each image is computed by one thread in a fixed order, so the result does
//   not depend on the thread count.
// Hue and gamma are not here (their TF kernels use rgb_to_hsv / pow, which this
// file does not reproduce); FusedPixel runs chains with them in plain TF.
//
// Layout: each image is converted to channel planes of float32 (fits in L2 at
// 224x224), every op is one simple loop over the planes (the compiler
// vectorizes them; any width gives the same bits), and the last pass writes the
// interleaved uint8 or float32 output.

#include <algorithm>
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
#include "tensorflow/core/util/work_sharder.h"

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipePixelChain")
    .Input("images: T")
    .Input("params: float")
    .Input("apply: bool")
    .Attr("T: {uint8, float}")
    .Attr("out_dtype: {uint8, float}")
    .Attr("ops: list(string) >= 0")
    .Attr("gated: list(bool) >= 0")
    .Attr("to_float: bool")
    .Attr("normalize: bool")
    .Attr("mean: list(float) >= 0")
    .Attr("std: list(float) >= 0")
    .Output("out: out_dtype")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle images, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 2, &unused));
      c->set_output(0, images);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Colour chain over a batch [B,H,W,C]: ops (brightness, contrast, saturation) with
per-sample params [B, n_ops]; apply [B, n_ops] selects the result of the ops
whose `gated` flag is set. to_float: float32 [0,1] chain (clip after each op);
else uint8 levels (round + saturate after each op). normalize: (x01 - mean) /
std. Bit-identical to tfpipe.pipeline.fast.FusedPixel's pure-TF twin.
)doc");

namespace {

enum class Kind { kBrightness, kContrast, kSaturation };

// tf.round (half to even) without a libm call (SSE2 has no roundps); keeps the
// sign of a result that rounds to zero, as rint does.
// Branch-free, so the loops vectorize.
inline float RoundEven(float v) {
  const float a = std::fabs(v);
  float r = (a + 8388608.0f) - 8388608.0f;
  r = a < 8388608.0f ? r : a;  // >= 2^23: already an integer (inf and NaN stay)
  return std::copysign(r, v);
}

// tf.clip_by_value(v, lo, hi) = maximum(minimum(v, hi), lo)
inline float Clip(float v, float lo, float hi) {
  v = v < hi ? v : hi;
  return v > lo ? v : lo;
}

#if defined(__SSE2__)
// The same operations on 4 lanes (SSE2 is the x86-64 baseline, so no dispatch):
// minps(a, b) = a < b ? a : b and maxps(a, b) = a > b ? a : b, as Clip and the
// saturation's max/min are written; each lane is the scalar result.
inline __m128 RoundEven4(__m128 v) {
  const __m128 sign = _mm_set1_ps(-0.0f), big = _mm_set1_ps(8388608.0f);
  const __m128 a = _mm_andnot_ps(sign, v);
  __m128 r = _mm_sub_ps(_mm_add_ps(a, big), big);
  const __m128 small = _mm_cmplt_ps(a, big);
  r = _mm_or_ps(_mm_and_ps(small, r), _mm_andnot_ps(small, a));
  return _mm_or_ps(r, _mm_and_ps(sign, v));  // copysign(r, v): r has no sign bit
}
inline __m128 Clip4(__m128 v, __m128 lo, __m128 hi) { return _mm_max_ps(_mm_min_ps(v, hi), lo); }
#endif

// Levels rounding + clip of p[0..n) after `op` (elementwise): the vector loop and
// the scalar tail compute the same bits.
template <typename Op>
void LevelsLoop(float* __restrict p, int64_t n, float lo, float hi, Op op) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 lo4 = _mm_set1_ps(lo), hi4 = _mm_set1_ps(hi);
  for (; i + 4 <= n; i += 4) {
    _mm_storeu_ps(p + i, Clip4(RoundEven4(op(_mm_loadu_ps(p + i))), lo4, hi4));
  }
#endif
  for (; i < n; ++i) p[i] = Clip(RoundEven(op(p[i])), lo, hi);
}

// color._pairwise_sum of v[0..n): t needs TreeSize(n) floats.
inline int64_t TreeSize(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p / 2 + 1;
}

float TreeSum(const float* __restrict v, int64_t n, float* __restrict t) {
  if (n == 1) return v[0];
  int64_t p = 1;
  while (p < n) p <<= 1;
  int64_t h = p >> 1;  // h < n <= p
  for (int64_t i = 0; i < n - h; ++i) t[i] = v[i] + v[i + h];
  for (int64_t i = n - h; i < h; ++i) t[i] = v[i] + 0.0f;  // the zero padding, added
  while (h > 1) {
    h >>= 1;
    for (int64_t i = 0; i < h; ++i) t[i] = t[i] + t[i + h];
  }
  return t[0];
}

class PixelChainOp : public OpKernel {
 public:
  explicit PixelChainOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::vector<std::string> ops;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ops", &ops));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("gated", &gated_));
    OP_REQUIRES(ctx, gated_.size() == ops.size(),
                errors::InvalidArgument("gated must have one flag per op, got ",
                                        gated_.size(), " for ", ops.size(), " ops"));
    for (const auto& name : ops) {
      if (name == "brightness") {
        kinds_.push_back(Kind::kBrightness);
      } else if (name == "contrast") {
        kinds_.push_back(Kind::kContrast);
      } else if (name == "saturation") {
        kinds_.push_back(Kind::kSaturation);
      } else {
        ctx->CtxFailure(errors::InvalidArgument(
            "ops: unknown colour op '", name, "'; allowed: brightness, contrast, saturation"));
        return;
      }
    }
    OP_REQUIRES_OK(ctx, ctx->GetAttr("to_float", &to_float_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("normalize", &normalize_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("mean", &mean_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("std", &std_));
    DataType in, out;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("T", &in));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("out_dtype", &out));
    float_in_ = in == DT_FLOAT;
    OP_REQUIRES(ctx, !float_in_ || to_float_,
                errors::InvalidArgument("a float32 input needs to_float=true"));
    const bool float_out = normalize_ || to_float_;
    OP_REQUIRES(ctx, (out == DT_FLOAT) == float_out,
                errors::InvalidArgument("out_dtype must be float32 when to_float or "
                                        "normalize is set, else uint8"));
    if (normalize_) {
      OP_REQUIRES(ctx, !mean_.empty() && mean_.size() == std_.size(),
                  errors::InvalidArgument("normalize needs mean and std of the same length"));
    }
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    const Tensor& params = ctx->input(1);
    const Tensor& apply = ctx->input(2);
    const int64_t n_ops = static_cast<int64_t>(kinds_.size());
    OP_REQUIRES(ctx, images.dims() == 4,
                errors::InvalidArgument("images must be [B,H,W,C], got ",
                                        images.shape().DebugString()));
    const int64_t b = images.dim_size(0), h = images.dim_size(1), w = images.dim_size(2),
                  c = images.dim_size(3);
    OP_REQUIRES(ctx, params.dims() == 2 && params.dim_size(0) == b &&
                         params.dim_size(1) == n_ops && apply.shape() == params.shape(),
                errors::InvalidArgument("params and apply must be [", b, ", ", n_ops,
                                        "], got ", params.shape().DebugString(), " and ",
                                        apply.shape().DebugString()));
    for (Kind k : kinds_) {
      OP_REQUIRES(ctx, k != Kind::kSaturation || c == 3,
                  errors::InvalidArgument("saturation needs 3 channels, got ", c));
    }
    if (normalize_) {
      OP_REQUIRES(ctx, mean_.size() == 1 || static_cast<int64_t>(mean_.size()) == c,
                  errors::InvalidArgument("normalize.mean/std must have 1 or ", c,
                                          " values, got ", mean_.size()));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    const int64_t n = h * w;
    if (b == 0 || n == 0 || c == 0) return;

    // normalize: x * (1 / (scale * std)) - mean / std, as color.normalize computes
    // its constants (float32, scale = 255 for uint8 levels, 1 for [0,1] floats)
    std::vector<float> na(c), nb(c);
    if (normalize_) {
      const float scale = to_float_ ? 1.0f : 255.0f;
      for (int64_t k = 0; k < c; ++k) {
        const float m = mean_[mean_.size() == 1 ? 0 : k], s = std_[std_.size() == 1 ? 0 : k];
        na[k] = 1.0f / (scale * s);
        nb[k] = m / s;
      }
    }
    const float* prm = params.flat<float>().data();
    const bool* app = apply.flat<bool>().data();
    const uint8_t* in8 = float_in_ ? nullptr : images.flat<uint8_t>().data();
    const float* inf = float_in_ ? images.flat<float>().data() : nullptr;
    const bool float_out = normalize_ || to_float_;
    float* outf = float_out ? out->flat<float>().data() : nullptr;
    uint8_t* out8 = float_out ? nullptr : out->flat<uint8_t>().data();

    if (kinds_.empty() && normalize_ && c <= 4) {
      // normalize alone (eval, plain batches): one contiguous pass, no planes. The
      // per-channel constants repeat with period c; a block of 12 values holds a
      // whole number of pixels for c = 1, 2, 3, 4.
      float pa[12], pb[12];
      for (int k = 0; k < 12; ++k) {
        pa[k] = na[k % c];
        pb[k] = nb[k % c];
      }
      auto norm = [&](int64_t start, int64_t limit) {
        // whole images: lo is a multiple of c, so block position k is channel k % c
        const int64_t lo = start * n * c, hi = limit * n * c;
        const int64_t end = lo + ((hi - lo) / 12) * 12;
        int64_t i = lo;
        if (float_in_) {
          for (; i < end; i += 12) {
            for (int k = 0; k < 12; ++k) outf[i + k] = inf[i + k] * pa[k] - pb[k];
          }
          for (; i < hi; ++i) outf[i] = inf[i] * na[(i - lo) % c] - nb[(i - lo) % c];
        } else {
          for (; i < end; i += 12) {
            for (int k = 0; k < 12; ++k) {
              outf[i + k] = static_cast<float>(in8[i + k]) * pa[k] - pb[k];
            }
          }
          for (; i < hi; ++i) {
            outf[i] = static_cast<float>(in8[i]) * na[(i - lo) % c] - nb[(i - lo) % c];
          }
        }
      };
      auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
      Shard(workers->num_threads, workers->workers, b, n * c * 2, norm);
      return;
    }
    auto run = [&](int64_t start, int64_t limit) {
      std::vector<float> planes(c * n), tree(TreeSize(n));
      for (int64_t img = start; img < limit; ++img) {
        Image(img, n, c, in8, inf, prm + img * n_ops, app + img * n_ops, planes.data(),
              tree.data(), na.data(), nb.data(), outf, out8);
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const int64_t cost = n * c * (8 + 6 * n_ops);  // rough cycles per image
    Shard(workers->num_threads, workers->workers, b, cost, run);
  }

 private:
  void Image(int64_t img, int64_t n, int64_t c, const uint8_t* in8, const float* inf,
             const float* prm, const bool* app, float* planes, float* tree, const float* na,
             const float* nb, float* outf, uint8_t* out8) const {
    const float lo = 0.0f, hi = to_float_ ? 1.0f : 255.0f;
    // load: tf.cast(x, float32) * (1 / 255) (float chain) or the uint8 levels as floats
    const float k255 = static_cast<float>(1.0 / 255.0);
    if (c == 3 && inf == nullptr) {  // the common case, as one deinterleaving loop
      const uint8_t* __restrict src = in8 + img * n * 3;
      float* __restrict p0 = planes;
      float* __restrict p1 = planes + n;
      float* __restrict p2 = planes + 2 * n;
      const float k = to_float_ ? k255 : 1.0f;  // x * 1 is exact: same as no multiply
      for (int64_t i = 0; i < n; ++i) {
        p0[i] = static_cast<float>(src[3 * i]) * k;
        p1[i] = static_cast<float>(src[3 * i + 1]) * k;
        p2[i] = static_cast<float>(src[3 * i + 2]) * k;
      }
    }
    for (int64_t ch = 0; ch < c && !(c == 3 && inf == nullptr); ++ch) {
      float* __restrict p = planes + ch * n;
      if (inf != nullptr) {
        const float* src = inf + img * n * c + ch;
        for (int64_t i = 0; i < n; ++i) p[i] = src[i * c];
      } else {
        const uint8_t* src = in8 + img * n * c + ch;
        if (to_float_) {
          for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(src[i * c]) * k255;
        } else {
          for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(src[i * c]);
        }
      }
    }
    for (size_t j = 0; j < kinds_.size(); ++j) {
      if (gated_[j] && !app[j]) continue;  // where(apply, out, y) with apply false = y
      const float v = prm[j];
      switch (kinds_[j]) {
        case Kind::kBrightness: {
          // x + delta * scale (scale 1: delta itself)
          const float d = to_float_ ? v : v * 255.0f;
          for (int64_t ch = 0; ch < c; ++ch) {
            float* __restrict p = planes + ch * n;
            if (to_float_) {
              for (int64_t i = 0; i < n; ++i) p[i] = Clip(p[i] + d, lo, hi);
            } else {
              LevelsLoop(p, n, lo, hi, [d](auto x) { return x + d; });
            }
          }
          break;
        }
        case Kind::kContrast: {
          for (int64_t ch = 0; ch < c; ++ch) {
            float* __restrict p = planes + ch * n;
            float m;
            if (to_float_) {
              m = TreeSum(p, n, tree) * (1.0f / static_cast<float>(n));
            } else {
              int64_t s = 0;  // exact: the levels are integers
              for (int64_t i = 0; i < n; ++i) s += static_cast<int32_t>(p[i]);
              m = static_cast<float>(static_cast<double>(s) * (1.0 / static_cast<double>(n)));
            }
            if (to_float_) {
              for (int64_t i = 0; i < n; ++i) p[i] = Clip((p[i] - m) * v + m, lo, hi);
            } else {
              LevelsLoop(p, n, lo, hi, [m, v](auto x) { return (x - m) * v + m; });
            }
          }
          break;
        }
        case Kind::kSaturation: {
          float* __restrict r = planes;
          float* __restrict g = planes + n;
          float* __restrict bl = planes + 2 * n;
          int64_t i = 0;
#if defined(__SSE2__)
          {
            const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f), f4 = _mm_set1_ps(v);
            const __m128 lo4 = _mm_set1_ps(lo), hi4 = _mm_set1_ps(hi);
            for (; i + 4 <= n; i += 4) {
              const __m128 x0 = _mm_loadu_ps(r + i), x1 = _mm_loadu_ps(g + i),
                           x2 = _mm_loadu_ps(bl + i);
              const __m128 mx = _mm_max_ps(_mm_max_ps(x0, x1), x2);
              const __m128 mn = _mm_min_ps(_mm_min_ps(x0, x1), x2);
              const __m128 chroma = _mm_sub_ps(mx, mn);
              const __m128 isz = _mm_cmpeq_ps(chroma, zero);
              const __m128 den = _mm_or_ps(_mm_and_ps(isz, one), _mm_andnot_ps(isz, chroma));
              const __m128 q = _mm_andnot_ps(isz, _mm_div_ps(mx, den));
              __m128 f = _mm_min_ps(f4, q);
              f = _mm_and_ps(_mm_cmpgt_ps(chroma, zero), f);
              __m128 o0 = _mm_sub_ps(mx, _mm_mul_ps(f, _mm_sub_ps(mx, x0)));
              __m128 o1 = _mm_sub_ps(mx, _mm_mul_ps(f, _mm_sub_ps(mx, x1)));
              __m128 o2 = _mm_sub_ps(mx, _mm_mul_ps(f, _mm_sub_ps(mx, x2)));
              if (!to_float_) {
                o0 = RoundEven4(o0);
                o1 = RoundEven4(o1);
                o2 = RoundEven4(o2);
              }
              _mm_storeu_ps(r + i, Clip4(o0, lo4, hi4));
              _mm_storeu_ps(g + i, Clip4(o1, lo4, hi4));
              _mm_storeu_ps(bl + i, Clip4(o2, lo4, hi4));
            }
          }
#endif
          for (; i < n; ++i) {
            const float x0 = r[i], x1 = g[i], x2 = bl[i];
            float mx = x0 > x1 ? x0 : x1;
            mx = mx > x2 ? mx : x2;
            float mn = x0 < x1 ? x0 : x1;
            mn = mn < x2 ? mn : x2;
            const float chroma = mx - mn;
            // divide_no_nan, with the division unconditional so the loop vectorizes
            const float q0 = mx / (chroma == 0.0f ? 1.0f : chroma);
            const float q = chroma == 0.0f ? 0.0f : q0;
            float f = v < q ? v : q;                                // minimum(factor, q)
            f = chroma > 0.0f ? f : 0.0f;
            float o0 = mx - f * (mx - x0), o1 = mx - f * (mx - x1), o2 = mx - f * (mx - x2);
            if (!to_float_) {
              o0 = RoundEven(o0);
              o1 = RoundEven(o1);
              o2 = RoundEven(o2);
            }
            r[i] = Clip(o0, lo, hi);
            g[i] = Clip(o1, lo, hi);
            bl[i] = Clip(o2, lo, hi);
          }
          break;
        }
      }
    }
    // output: interleave; uint8 levels are exact integers in [0, 255]
    if (c == 3) {
      const float* __restrict p0 = planes;
      const float* __restrict p1 = planes + n;
      const float* __restrict p2 = planes + 2 * n;
      if (normalize_) {
        float* __restrict dst = outf + img * n * 3;
        const float a0 = na[0], a1 = na[1], a2 = na[2], b0 = nb[0], b1 = nb[1], b2 = nb[2];
        for (int64_t i = 0; i < n; ++i) {
          dst[3 * i] = p0[i] * a0 - b0;
          dst[3 * i + 1] = p1[i] * a1 - b1;
          dst[3 * i + 2] = p2[i] * a2 - b2;
        }
      } else if (to_float_) {
        float* __restrict dst = outf + img * n * 3;
        for (int64_t i = 0; i < n; ++i) {
          dst[3 * i] = p0[i];
          dst[3 * i + 1] = p1[i];
          dst[3 * i + 2] = p2[i];
        }
      } else {
        uint8_t* __restrict dst = out8 + img * n * 3;
        for (int64_t i = 0; i < n; ++i) {
          dst[3 * i] = static_cast<uint8_t>(static_cast<int32_t>(p0[i]));
          dst[3 * i + 1] = static_cast<uint8_t>(static_cast<int32_t>(p1[i]));
          dst[3 * i + 2] = static_cast<uint8_t>(static_cast<int32_t>(p2[i]));
        }
      }
      return;
    }
    for (int64_t ch = 0; ch < c; ++ch) {
      const float* __restrict p = planes + ch * n;
      if (normalize_) {
        const float a = na[ch], s = nb[ch];
        float* dst = outf + img * n * c + ch;
        for (int64_t i = 0; i < n; ++i) dst[i * c] = p[i] * a - s;
      } else if (to_float_) {
        float* dst = outf + img * n * c + ch;
        for (int64_t i = 0; i < n; ++i) dst[i * c] = p[i];
      } else {
        uint8_t* dst = out8 + img * n * c + ch;
        for (int64_t i = 0; i < n; ++i) dst[i * c] = static_cast<uint8_t>(static_cast<int32_t>(p[i]));
      }
    }
  }

  std::vector<Kind> kinds_;
  std::vector<bool> gated_;
  std::vector<float> mean_, std_;
  bool to_float_ = true, normalize_ = false, float_in_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipePixelChain").Device(DEVICE_CPU), PixelChainOp);
