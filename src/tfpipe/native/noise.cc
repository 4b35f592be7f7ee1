// TfpipeNoise: per-pixel Gaussian / speckle noise over a batch [B,H,W,C], each
// image's noise drawn from its own seed, bit-identical to its pure-TF twin
// (tfpipe.augment.pixel.random_gaussian_noise / random_speckle_noise without the
// library: `tf.random.stateless_normal(image_shape, seed, alg="philox")` per row
// through tf.map_fn, then the elementwise formula and the uint8/float restore).
//
// Why bit-identical:
// - the normals are TF's own: the seed is scrambled into (key, counter) exactly as
//   TF's stateless ops do (one Philox4x32-10 call on (lo s0, hi s0, lo s1, hi s1)
//   with the fixed key 0x02461E293EC8F720: key = mix[0..1], counter = (0, 0,
//   mix[2], mix[3])), and the values come from TF's headers themselves
//   (tsl::random::PhiloxRandom + NormalDistribution<PhiloxRandom, float>: 4
//   normals per generator call, Box-Muller with logf/sqrt/sincosf, element j from
//   call j / 4 as in FillPhiloxRandom);
// - the build has no -march and -ffp-contract=off (build.py), like the TF wheel's
//   baseline build, so no FMA changes a rounding; logf/sincosf are the same glibc
//   functions TF's kernel calls in the same process;
// - the formula is the twin's IEEE operations in its order: gaussian
//   x + (stddev * scale) * n, speckle x + x * (stddev * n); uint8: round half to
//   even then clip to [0, 255]; float32: clip to [0, 1];
// - threads: whole images per shard, each computed by one thread in a fixed
//   order; rows whose `apply` is false are copied (the twin's tf.where) and draw
//   nothing, which is where the p < 1 saving comes from.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/random/philox_random.h"
#include "tensorflow/core/lib/random/random_distributions.h"
#include "tensorflow/core/util/work_sharder.h"

namespace tfpipe_noise {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::errors::InvalidArgument;
using Philox = tensorflow::random::PhiloxRandom;
using Normal = tensorflow::random::NormalDistribution<Philox, float>;

REGISTER_OP("TfpipeNoise")
    .Input("images: T")
    .Input("seeds: int64")
    .Input("apply: bool")
    .Attr("T: {uint8, float}")
    .Attr("kind: {'gaussian', 'speckle'}")
    .Attr("stddev: float")
    .Output("out: T")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle images, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
      c->set_output(0, images);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Noise over a batch [B,H,W,C] (uint8 0..255 or float32 0..1): row i gets
stateless_normal([H,W,C], seeds[i], philox) noise where apply[i], else is copied.
kind gaussian: x + stddev * scale * n; speckle: x + x * (stddev * n).
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

inline float Restore(float v, bool u8) {
  if (u8) {
    v = std::nearbyint(v);  // tf.round: half to even (default rounding mode)
    return v < 0.0f ? 0.0f : (v > 255.0f ? 255.0f : v);
  }
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

template <typename T>
class NoiseOp : public OpKernel {
 public:
  explicit NoiseOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string kind;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("kind", &kind));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("stddev", &stddev_));
    speckle_ = kind == "speckle";
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    const Tensor& seeds = ctx->input(1);
    const Tensor& apply = ctx->input(2);
    OP_REQUIRES(ctx, images.dims() == 4,
                InvalidArgument("images must be [B,H,W,C], got ", images.shape().DebugString()));
    const int64_t b = images.dim_size(0);
    OP_REQUIRES(ctx, seeds.dims() == 2 && seeds.dim_size(0) == b && seeds.dim_size(1) == 2,
                InvalidArgument("seeds must be [", b, ", 2], got ", seeds.shape().DebugString()));
    OP_REQUIRES(ctx, apply.dims() == 1 && apply.dim_size(0) == b,
                InvalidArgument("apply must be [", b, "], got ", apply.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    const int64_t n = b == 0 ? 0 : images.NumElements() / b;
    if (n == 0) return;
    const T* in = images.flat<T>().data();
    T* dst = out->flat<T>().data();
    const int64_t* sd = seeds.flat<int64_t>().data();
    const bool* app = apply.flat<bool>().data();
    constexpr bool kU8 = std::is_same<T, uint8_t>::value;
    // gaussian: (stddev * scale) rounded to float32 once, as the twin's
    // `_param(stddev) * scale`; speckle multiplies stddev * n first
    const float sd_scaled = stddev_ * (kU8 ? 255.0f : 1.0f);
    const float stddev = stddev_;
    const bool speckle = speckle_;

    auto run = [&](int64_t start, int64_t limit) {
      for (int64_t i = start; i < limit; ++i) {
        const T* x = in + i * n;
        T* y = dst + i * n;
        if (!app[i]) {
          std::memcpy(y, x, n * sizeof(T));
          continue;
        }
        Philox gen = FromSeed(sd[2 * i], sd[2 * i + 1]);
        Normal normal;
        for (int64_t j = 0; j < n; j += Normal::kResultElementCount) {
          const Normal::ResultType r = normal(&gen);
          const int64_t m = std::min<int64_t>(Normal::kResultElementCount, n - j);
          for (int64_t k = 0; k < m; ++k) {
            const float v = static_cast<float>(x[j + k]);
            float o;
            if (speckle) {
              const float t = stddev * r[k];
              const float u = v * t;
              o = v + u;
            } else {
              const float t = sd_scaled * r[k];
              o = v + t;
            }
            y[j + k] = static_cast<T>(Restore(o, kU8));
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    tensorflow::Shard(workers->num_threads, workers->workers, b, n * 60, run);
  }

 private:
  float stddev_ = 0.0f;
  bool speckle_ = false;
};

REGISTER_KERNEL_BUILDER(
    Name("TfpipeNoise").Device(tensorflow::DEVICE_CPU).TypeConstraint<uint8_t>("T"),
    NoiseOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("TfpipeNoise").Device(tensorflow::DEVICE_CPU).TypeConstraint<float>("T"),
    NoiseOp<float>);

}  // namespace tfpipe_noise
