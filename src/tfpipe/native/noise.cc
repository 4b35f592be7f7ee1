// TfpipeNoise: per-pixel Gaussian / speckle noise over a batch [B,H,W,C], each
// image's noise drawn from its own seed, bit-identical to its pure-TF twin
// (tfpipe.augment.pixel.random_gaussian_noise / random_speckle_noise without the
// library: `pixel.sample_noise` per row, then the elementwise formula and the
// uint8/float restore).
//
// The normal is tfpipe's own (docs/augment-pixel.md, "noise: tfpipe's standard
// normal"), not TF's Box-Muller `stateless_normal`: glibc's logf/sincosf cost
// ~10 ns per pair and glibc picks an FMA or a non-FMA variant of them per host
// at run time. Element j of an image (row-major [H,W,C]) takes the uint32 word
// u = word j % 4 of the (j / 4)-th Philox4x32-10 output of the image's seed --
// exactly `tf.random.stateless_uniform(shape, seed, None, None, tf.uint32,
// alg="philox")` -- and maps it, in float32 IEEE operations without FMA:
//   v = u >> 1 (31 bits), f = max(float(int32 v), 1)  (round to nearest)
//   b = bits(f), i = (b - bits(1.0)) >> 17, frac = float(b & 0x1FFFF) * 2^-17
//   z = A[i] + D[i] * frac, negated when u & 1
// A[i] (the `table` input, column 0) are the knots -ndtri(F_i 2^-32) of the
// inverse normal CDF over the float32 grid F_i (64 per octave of f, 1985 knots),
// D[i] = A[i+1] - A[i] (column 1): a piecewise-linear inverse CDF, the same
// integer and IEEE operations on every host by construction.
//
// Why bit-identical to the twin:
// - the seed is scrambled into (key, counter) exactly as TF's stateless ops do
//   (one Philox4x32-10 call on (lo s0, hi s0, lo s1, hi s1) with the fixed key
//   0x02461E293EC8F720: key = mix[0..1], counter = (0, 0, mix[2], mix[3])), and
//   the words come from TF's own tsl::random::PhiloxRandom;
// - the build has no -march and -ffp-contract=off (build.py): SSE2 lanes do the
//   twin's scalar operations one by one (cvtdq2ps rounds to nearest like TF's
//   Cast, maxps/mulps/addps are single IEEE operations); Philox runs on 4
//   blocks at once in SSE2 lanes (pmuludq: the same 32x32 -> 64-bit products);
// - the formula is the twin's IEEE operations in its order: gaussian
//   x + (stddev * scale) * n, speckle x + x * (stddev * n); uint8: round half to
//   even then clip to [0, 255]; float32: clip to [0, 1];
// - speckle of a +0 pixel is +0 whatever n is (0 * finite is +-0, +0 + -0 = +0):
//   a group of 16 pixels that are all +0 skips its Philox calls and writes 0,
//   the value the twin computes;
// - threads: whole images per shard, each computed by one thread in a fixed
//   order; rows whose `apply` is false are copied (the twin's tf.where) and draw
//   nothing, which is where the p < 1 saving comes from.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/lib/random/philox_random.h"
#include "tensorflow/core/util/work_sharder.h"

#include "common.h"  // Philox seeding, uint8 rounding (shared with the other kernels)

namespace tfpipe_noise {

using tensorflow::OpKernel;
using tensorflow::OpKernelConstruction;
using tensorflow::OpKernelContext;
using tensorflow::Tensor;
using tensorflow::errors::InvalidArgument;
using Philox = tfpipe_common::Philox;
using tfpipe_common::PhiloxFromSeed;

constexpr int64_t kKnots = 31 * 64 + 1;  // knot 1984 (f = 2^31) is the last one reached
constexpr int64_t kTableRows = kKnots + 1;

REGISTER_OP("TfpipeNoise")
    .Input("images: T")
    .Input("seeds: int64")
    .Input("apply: bool")
    .Input("table: float")
    .Attr("T: {uint8, float}")
    .Attr("kind: {'gaussian', 'speckle'}")
    .Attr("stddev: float")
    .Output("out: T")
    .SetShapeFn([](tensorflow::shape_inference::InferenceContext* c) {
      tensorflow::shape_inference::ShapeHandle images, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(3), 2, &unused));
      c->set_output(0, images);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Noise over a batch [B,H,W,C] (uint8 0..255 or float32 0..1): row i gets tfpipe's
standard normal n (Philox words of seeds[i] through the piecewise-linear inverse
CDF `table` [1986, 2]) where apply[i], else is copied.
kind gaussian: x + stddev * scale * n; speckle: x + x * (stddev * n).
)doc");

// Key and counter words of an image's generator: block q (elements 4q..4q+3) is
// Philox4x32-10 of the counter (q, 0, c2, c3) -- PhiloxFromSeed's counter advanced q
// times (q < 2^32: no carry out of word 0 for images below 2^34 elements).
struct Stream {
  uint32_t k0, k1, c2, c3;
};

inline Stream StreamOf(int64_t s0, int64_t s1) {
  Philox gen = PhiloxFromSeed(s0, s1);
  return {gen.key()[0], gen.key()[1], gen.counter()[2], gen.counter()[3]};
}

// The 16 normals of blocks q..q+3 in element order (the definition above).
inline void Normals16(const Stream& st, uint32_t q, const float* table, float* z) {
#if defined(__SSE2__)
  __m128i c0 = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(q)), _mm_setr_epi32(0, 1, 2, 3));
  __m128i c1 = _mm_setzero_si128();
  __m128i c2 = _mm_set1_epi32(static_cast<int>(st.c2));
  __m128i c3 = _mm_set1_epi32(static_cast<int>(st.c3));
  uint32_t k0 = st.k0, k1 = st.k1;
  const __m128i ma = _mm_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m128i mb = _mm_set1_epi32(static_cast<int>(0xCD9E8D57u));
  for (int round = 0; round < 10; ++round) {
    // 32x32 -> 64-bit products of 4 lanes: even lanes, then odd lanes shifted down
    const __m128i a02 = _mm_shuffle_epi32(_mm_mul_epu32(c0, ma), _MM_SHUFFLE(3, 1, 2, 0));
    const __m128i a13 = _mm_shuffle_epi32(_mm_mul_epu32(_mm_srli_epi64(c0, 32), ma),
                                          _MM_SHUFFLE(3, 1, 2, 0));
    const __m128i b02 = _mm_shuffle_epi32(_mm_mul_epu32(c2, mb), _MM_SHUFFLE(3, 1, 2, 0));
    const __m128i b13 = _mm_shuffle_epi32(_mm_mul_epu32(_mm_srli_epi64(c2, 32), mb),
                                          _MM_SHUFFLE(3, 1, 2, 0));
    const __m128i lo0 = _mm_unpacklo_epi32(a02, a13), hi0 = _mm_unpackhi_epi32(a02, a13);
    const __m128i lo1 = _mm_unpacklo_epi32(b02, b13), hi1 = _mm_unpackhi_epi32(b02, b13);
    const __m128i n0 = _mm_xor_si128(_mm_xor_si128(hi1, c1), _mm_set1_epi32(static_cast<int>(k0)));
    const __m128i n2 = _mm_xor_si128(_mm_xor_si128(hi0, c3), _mm_set1_epi32(static_cast<int>(k1)));
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;  // RaiseKey (an unused raise after the last round)
    k1 += 0xBB67AE85u;
  }
  const __m128i words[4] = {c0, c1, c2, c3};  // word w of blocks q..q+3
  __m128 zw[4];
  for (int w = 0; w < 4; ++w) {
    const __m128i u = words[w];
    const __m128 f = _mm_max_ps(_mm_cvtepi32_ps(_mm_srli_epi32(u, 1)), _mm_set1_ps(1.0f));
    const __m128i b = _mm_castps_si128(f);
    alignas(16) int32_t idx[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(idx),
                    _mm_srli_epi32(_mm_sub_epi32(b, _mm_set1_epi32(0x3F800000)), 17));
    const __m128 frac = _mm_mul_ps(
        _mm_cvtepi32_ps(_mm_and_si128(b, _mm_set1_epi32(0x1FFFF))), _mm_set1_ps(1.0f / 131072.0f));
    const float* t0 = table + 2 * idx[0];
    const float* t1 = table + 2 * idx[1];
    const float* t2 = table + 2 * idx[2];
    const float* t3 = table + 2 * idx[3];
    const __m128 a = _mm_setr_ps(t0[0], t1[0], t2[0], t3[0]);
    const __m128 d = _mm_setr_ps(t0[1], t1[1], t2[1], t3[1]);
    const __m128 sign = _mm_castsi128_ps(_mm_slli_epi32(u, 31));  // bit 0 -> the sign bit
    zw[w] = _mm_xor_ps(_mm_add_ps(a, _mm_mul_ps(d, frac)), sign);
  }
  _MM_TRANSPOSE4_PS(zw[0], zw[1], zw[2], zw[3]);  // -> block q + k's 4 words in order
  for (int k = 0; k < 4; ++k) _mm_storeu_ps(z + 4 * k, zw[k]);
#else
  for (uint32_t k = 0; k < 4; ++k) {
    Philox::ResultType ctr;
    ctr[0] = q + k;
    ctr[1] = 0;
    ctr[2] = st.c2;
    ctr[3] = st.c3;
    Philox::Key key;
    key[0] = st.k0;
    key[1] = st.k1;
    const Philox::ResultType r = Philox(ctr, key)();
    for (int w = 0; w < 4; ++w) {
      const int32_t v = static_cast<int32_t>(r[w] >> 1);
      float f = static_cast<float>(v);
      f = f < 1.0f ? 1.0f : f;
      uint32_t b;
      std::memcpy(&b, &f, 4);
      const uint32_t i = (b - 0x3F800000u) >> 17;
      const float frac = static_cast<float>(b & 0x1FFFFu) * (1.0f / 131072.0f);
      const float m = table[2 * i] + table[2 * i + 1] * frac;
      z[4 * k + w] = (r[w] & 1u) ? -m : m;
    }
  }
#endif
}

inline float Restore(float v, bool u8) {
  if (u8) return tfpipe_common::RoundSaturateU8(v);  // tf.round, then the clip
  return v < 0.0f ? 0.0f : (v > 1.0f ? 1.0f : v);
}

template <typename T>
inline bool AllZero16(const T* x) {
  uint64_t w[2 * sizeof(T)];  // +0.0 only for float: the bit pattern 0
  std::memcpy(w, x, 16 * sizeof(T));
  uint64_t acc = 0;
  for (size_t k = 0; k < 2 * sizeof(T); ++k) acc |= w[k];
  return acc == 0;
}

// The formula over 16 elements, the scalar code's operations lane by lane
// (cvtps2dq rounds half to even like nearbyint in the default mode; the pack
// instructions saturate to [0, 255] like the clip; the float clip keeps the
// scalar select's result, -0 included).
#if defined(__SSE2__)
inline __m128 Formula4(__m128 v, __m128 z, bool speckle, float stddev, float sd_scaled) {
  if (speckle) return _mm_add_ps(v, _mm_mul_ps(v, _mm_mul_ps(_mm_set1_ps(stddev), z)));
  return _mm_add_ps(v, _mm_mul_ps(_mm_set1_ps(sd_scaled), z));
}

inline void Apply16(const uint8_t* x, uint8_t* y, const float* z, bool speckle, float stddev,
                    float sd_scaled) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i px = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  const __m128i lo16 = _mm_unpacklo_epi8(px, zero), hi16 = _mm_unpackhi_epi8(px, zero);
  const __m128i q[4] = {_mm_unpacklo_epi16(lo16, zero), _mm_unpackhi_epi16(lo16, zero),
                        _mm_unpacklo_epi16(hi16, zero), _mm_unpackhi_epi16(hi16, zero)};
  __m128i r[4];
  for (int k = 0; k < 4; ++k) {
    const __m128 o = Formula4(_mm_cvtepi32_ps(q[k]), _mm_loadu_ps(z + 4 * k), speckle, stddev,
                              sd_scaled);
    r[k] = _mm_cvtps_epi32(o);
  }
  const __m128i packed =
      _mm_packus_epi16(_mm_packs_epi32(r[0], r[1]), _mm_packs_epi32(r[2], r[3]));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(y), packed);
}

inline void Apply16(const float* x, float* y, const float* z, bool speckle, float stddev,
                    float sd_scaled) {
  const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f);
  for (int k = 0; k < 4; ++k) {
    const __m128 o = Formula4(_mm_loadu_ps(x + 4 * k), _mm_loadu_ps(z + 4 * k), speckle, stddev,
                              sd_scaled);
    const __m128 below = _mm_cmplt_ps(o, zero), above = _mm_cmpgt_ps(o, one);
    __m128 c = _mm_or_ps(_mm_and_ps(above, one), _mm_andnot_ps(above, o));
    c = _mm_andnot_ps(below, c);  // o < 0 -> +0
    _mm_storeu_ps(y + 4 * k, c);
  }
}
#endif

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
    const Tensor& table_t = ctx->input(3);
    OP_REQUIRES(ctx, images.dims() == 4,
                InvalidArgument("images must be [B,H,W,C], got ", images.shape().DebugString()));
    const int64_t b = images.dim_size(0);
    OP_REQUIRES(ctx, seeds.dims() == 2 && seeds.dim_size(0) == b && seeds.dim_size(1) == 2,
                InvalidArgument("seeds must be [", b, ", 2], got ", seeds.shape().DebugString()));
    OP_REQUIRES(ctx, apply.dims() == 1 && apply.dim_size(0) == b,
                InvalidArgument("apply must be [", b, "], got ", apply.shape().DebugString()));
    OP_REQUIRES(ctx, table_t.dims() == 2 && table_t.dim_size(0) == kTableRows &&
                         table_t.dim_size(1) == 2,
                InvalidArgument("table must be [", kTableRows, ", 2] (noise.normal_table()), got ",
                                table_t.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    const int64_t n = b == 0 ? 0 : images.NumElements() / b;
    if (n == 0) return;
    OP_REQUIRES(ctx, n / 4 < (int64_t{1} << 32),
                InvalidArgument("images of more than 2^34 values are not supported"));
    const T* in = images.flat<T>().data();
    T* dst = out->flat<T>().data();
    const int64_t* sd = seeds.flat<int64_t>().data();
    const bool* app = apply.flat<bool>().data();
    const float* table = table_t.flat<float>().data();
    constexpr bool kU8 = std::is_same<T, uint8_t>::value;
    // gaussian: (stddev * scale) rounded to float32 once, as the twin's
    // `_param(stddev) * scale`; speckle multiplies stddev * n first
    const float sd_scaled = stddev_ * (kU8 ? 255.0f : 1.0f);
    const float stddev = stddev_;
    const bool speckle = speckle_;

    auto run = [&](int64_t start, int64_t limit) {
      alignas(16) float z[16];
      for (int64_t i = start; i < limit; ++i) {
        const T* x = in + i * n;
        T* y = dst + i * n;
        if (!app[i]) {
          std::memcpy(y, x, n * sizeof(T));
          continue;
        }
        const Stream st = StreamOf(sd[2 * i], sd[2 * i + 1]);
        for (int64_t j = 0; j < n; j += 16) {
          const int64_t m = std::min<int64_t>(16, n - j);
          if (speckle && m == 16 && AllZero16(x + j)) {  // speckle of +0 is +0: no draw
            std::memset(y + j, 0, 16 * sizeof(T));
            continue;
          }
          Normals16(st, static_cast<uint32_t>(j / 4), table, z);
#if defined(__SSE2__)
          if (m == 16) {
            Apply16(x + j, y + j, z, speckle, stddev, sd_scaled);
            continue;
          }
#endif
          for (int64_t k = 0; k < m; ++k) {
            const float v = static_cast<float>(x[j + k]);
            float o;
            if (speckle) {
              const float t = stddev * z[k];
              const float u = v * t;
              o = v + u;
            } else {
              const float t = sd_scaled * z[k];
              o = v + t;
            }
            y[j + k] = static_cast<T>(Restore(o, kU8));
          }
        }
      }
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    tensorflow::Shard(workers->num_threads, workers->workers, b, n * 8, run);
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
