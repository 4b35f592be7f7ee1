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

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/random/philox_random.h"
#include "tensorflow/core/lib/random/random_distributions.h"

namespace tfpipe_elastic {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::TensorShape;
using tensorflow::errors::InvalidArgument;
using Philox = tensorflow::random::PhiloxRandom;
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

// TF's GenerateKey (core/kernels/stateless_random_ops.cc) / _philox_scramble_seed.
inline Philox FromSeed(int64_t s0, int64_t s1) {
  const uint64_t a = static_cast<uint64_t>(s0), b = static_cast<uint64_t>(s1);
  Philox::ResultType ctr;
  ctr[0] = static_cast<uint32_t>(a);
  ctr[1] = static_cast<uint32_t>(a >> 32);
  ctr[2] = static_cast<uint32_t>(b);
  ctr[3] = static_cast<uint32_t>(b >> 32);
  Philox::Key scramble;
  scramble[0] = 0x3ec8f720u;
  scramble[1] = 0x02461e29u;
  Philox mixer(ctr, scramble);
  const Philox::ResultType mix = mixer();
  Philox::Key key;
  key[0] = mix[0];
  key[1] = mix[1];
  Philox::ResultType counter;
  counter[0] = 0;
  counter[1] = 0;
  counter[2] = mix[2];
  counter[3] = mix[3];
  return Philox(counter, key);
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
    Philox gen = FromSeed(seed.flat<int64_t>()(0), seed.flat<int64_t>()(1));
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
      float* acc = rows.data() + y * row;
      const float* src = noise.data() + y * row;
      const float t0 = taps_[0];
      for (int64_t e = 0; e < row; ++e) acc[e] = src[e] * t0;
      for (int64_t k = 1; k < n; ++k) {
        const float t = taps_[k];
        const float* s = src + k * row;
        for (int64_t e = 0; e < row; ++e) {
          const float term = s[e] * t;
          acc[e] = acc[e] + term;
        }
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({oh, ow, 2}), &out));
    float* dst = out->flat<float>().data();
    // columns: element (x, c) of a row takes src elements (x + k, c), k = 0..n-1
    for (int64_t y = 0; y < oh; ++y) {
      const float* src = rows.data() + y * row;
      float* acc = dst + y * ow * 2;
      const float t0 = taps_[0];
      for (int64_t e = 0; e < ow * 2; ++e) acc[e] = src[e] * t0;
      for (int64_t k = 1; k < n; ++k) {
        const float t = taps_[k];
        const float* s = src + k * 2;
        for (int64_t e = 0; e < ow * 2; ++e) {
          const float term = s[e] * t;
          acc[e] = acc[e] + term;
        }
      }
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
        const float x0f = std::floor(px), y0f = std::floor(py);
        const float tx = px - x0f, ty = py - y0f;
        const float ux = 1.0f - tx, uy = 1.0f - ty;
        const int64_t x0 = static_cast<int32_t>(x0f), y0 = static_cast<int32_t>(y0f);
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
  static T Store(float v) {
    if constexpr (std::is_same<T, uint8_t>::value) {
      v = std::nearbyint(v);  // tf.round: half to even; then saturate_cast
      return static_cast<uint8_t>(v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v));
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
