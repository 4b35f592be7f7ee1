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
//   integer sum (uint8 levels: int32 per element of a block, then int64; divided
//   in double, rounded once to float)
//   or, for a float intermediate, the pairwise halving tree of
//   color._pairwise_sum (pad to a power of two with zeros, add the upper half
//   to the lower half until one value is left): the same pairs added in the
//   same order in both;
// - tf.round is round half to even; a levels op's round-then-clip is computed as
//   clip-then-round, which gives the same bits for every value (Levels below, no
//   libm call);
// - threads: a batch is sharded over the CPU worker pool by whole images, and
//   each image is computed by one thread in a fixed order, so the result does
//   not depend on the thread count.
// Hue and gamma are not here (their TF kernels use rgb_to_hsv / pow, which this
// file does not reproduce); FusedPixel runs chains with them in plain TF.
//
// Layout: each image is processed in blocks of kBlock pixels, interleaved as in the
// tensor (element e is channel e % c; per-channel constants are laid out per
// element of a block), with SSE2 loops (x86-64 baseline) and, picked once per process
// where the CPU has it, AVX loops (8 lanes; the `isa: 'baseline'` attr forces SSE2);
// each lane is the scalar loop's IEEE operation. The only barrier is contrast's
// channel mean, so a chain runs as one pass per contrast + 1: load + the ops before
// the first contrast; then each contrast + the ops up to the next one; the last pass
// writes the output (streaming stores for float32). The ops between two barriers run over
// one block while it is in L1. A pass before a contrast keeps the image's values
// (n * c floats, in L2 at 224x224) and their means: levels as exact int32 sums per
// element of a block, floats as the tree computed block-wise from L2 (FoldTree).
// With one contrast and uint8 input nothing is kept: the values before the contrast
// are computed again from the uint8 pixels, block by block, for the tree (in its
// block order) and for the last pass (the same operations on the same inputs), so
// the L2 working set is the uint8 image (150 KB at 224x224), not 602 KB of floats --
// what lets TfpipeDecodeCropResizeBlock run the chain on a row next to its decode.
// With AVX the load and a first brightness are one loop, and so are a last pass's
// contrast and normalize (no other op between them): the same operations, fewer
// loads and stores. Measured and NOT used (benchmarks/writeout_bench.py,
// docs/performance.md): per-image [c][256] tables of the chain (bit-identical, but
// without a vector gather the lookups cost more than the SSE2 arithmetic), and
// reusing freed output buffers (TF's allocator already does; no page faults).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#include <immintrin.h>
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
    .Attr("isa: {'native', 'baseline'} = 'native'")
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

// tf.clip_by_value(v, lo, hi) = maximum(minimum(v, hi), lo)
inline float Clip(float v, float lo, float hi) {
  v = v < hi ? v : hi;
  return v > lo ? v : lo;
}

// A levels op's result: tf.round (half to even) then the clip to [0, 255], computed
// as the clip then the rounding, which gives the same bits for every v: NaN and
// v >= 255 give 255, v <= 0 (-0, -inf) gives +0, and on (0, 255) both are
// (v + 2^23) - 2^23, the round half to even of a float below 2^23 (SSE2 has no
// roundps; no libm call).
inline float Levels(float v) { return (Clip(v, 0.0f, 255.0f) + 8388608.0f) - 8388608.0f; }

// an op's output: levels, or the float chain's clip to [0, 1]
template <bool kLevels>
inline float Out(float v) {
  return kLevels ? Levels(v) : Clip(v, 0.0f, 1.0f);
}

#if defined(__SSE2__)
// The same operations on 4 lanes (SSE2 is the x86-64 baseline, so no dispatch):
// minps(a, b) = a < b ? a : b and maxps(a, b) = a > b ? a : b, as Clip and the
// saturation's max/min are written; each lane is the scalar result.
inline __m128 Clip4(__m128 v, __m128 lo, __m128 hi) { return _mm_max_ps(_mm_min_ps(v, hi), lo); }

template <bool kLevels>
inline __m128 Out4(__m128 v) {
  if (!kLevels) return Clip4(v, _mm_setzero_ps(), _mm_set1_ps(1.0f));
  const __m128 big = _mm_set1_ps(8388608.0f);
  return _mm_sub_ps(_mm_add_ps(Clip4(v, _mm_setzero_ps(), _mm_set1_ps(255.0f)), big), big);
}
#endif

// ---------------------------------------------------------------------------- AVX
// The hot loops again on 8 lanes (AVX: 256-bit float ops; its integer ops stay 128
// bits, so the uint8 widening is SSE2's, joined into 256 bits). Each lane is the same
// IEEE operation as the SSE2/scalar loop (no FMA: -ffp-contract=off and no "fma"
// target; vminps/vmaxps select exactly as minps/maxps), so the bits do not depend on
// which runs. The CPU is asked once per process (PixAvx); a kernel's
// `isa: 'baseline'` attr forces the SSE2 loops, as ops.cc's dispatch does.
#if defined(__x86_64__) && defined(__GNUC__) && defined(__SSE2__)
#define TFPIPE_PIX_AVX 1
#define PIX_AVX __attribute__((target("avx")))

bool PixAvx() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") != 0;
  }();
  return has && !tfpipe_isa_baseline;  // ops.cc: the kernel's `isa` attr (IsaScope)
}

PIX_AVX inline __m256 Clip8(__m256 v, __m256 lo, __m256 hi) {
  return _mm256_max_ps(_mm256_min_ps(v, hi), lo);
}

template <bool kLevels>
PIX_AVX inline __m256 Out8(__m256 v) {
  if (!kLevels) return Clip8(v, _mm256_setzero_ps(), _mm256_set1_ps(1.0f));
  const __m256 big = _mm256_set1_ps(8388608.0f);
  return _mm256_sub_ps(_mm256_add_ps(Clip8(v, _mm256_setzero_ps(), _mm256_set1_ps(255.0f)), big),
                       big);
}

// 16 uint8 -> two 8-lane float vectors (exact: zero-extend, cvtdq2ps)
PIX_AVX inline void Widen16(const uint8_t* src, __m256* f0, __m256* f1) {
  const __m128i z = _mm_setzero_si128();
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
  const __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
  *f0 = _mm256_cvtepi32_ps(_mm256_insertf128_si256(
      _mm256_castsi128_si256(_mm_unpacklo_epi16(lo, z)), _mm_unpackhi_epi16(lo, z), 1));
  *f1 = _mm256_cvtepi32_ps(_mm256_insertf128_si256(
      _mm256_castsi128_si256(_mm_unpacklo_epi16(hi, z)), _mm_unpackhi_epi16(hi, z), 1));
}

PIX_AVX void LoadU8Avx(const uint8_t* __restrict src, int64_t len, float k, float* __restrict x) {
  int64_t e = 0;
  const __m256 k8 = _mm256_set1_ps(k);
  for (; e + 16 <= len; e += 16) {
    __m256 f0, f1;
    Widen16(src + e, &f0, &f1);
    _mm256_storeu_ps(x + e, _mm256_mul_ps(f0, k8));
    _mm256_storeu_ps(x + e + 8, _mm256_mul_ps(f1, k8));
  }
  for (; e < len; ++e) x[e] = static_cast<float>(src[e]) * k;
}

// the load and a first brightness in one loop: Out(float(src[e]) * k + d)
template <bool kLevels>
PIX_AVX void LoadBrightU8Avx(const uint8_t* __restrict src, int64_t len, float k, float d,
                             float* __restrict x) {
  int64_t e = 0;
  const __m256 k8 = _mm256_set1_ps(k), d8 = _mm256_set1_ps(d);
  for (; e + 16 <= len; e += 16) {
    __m256 f0, f1;
    Widen16(src + e, &f0, &f1);
    _mm256_storeu_ps(x + e, Out8<kLevels>(_mm256_add_ps(_mm256_mul_ps(f0, k8), d8)));
    _mm256_storeu_ps(x + e + 8, Out8<kLevels>(_mm256_add_ps(_mm256_mul_ps(f1, k8), d8)));
  }
  for (; e < len; ++e) x[e] = Out<kLevels>(static_cast<float>(src[e]) * k + d);
}

template <bool kScale>
PIX_AVX void LoadNormU8Avx(const uint8_t* __restrict src, int64_t len, float k,
                           const float* __restrict a, const float* __restrict b,
                           float* __restrict dst) {
  int64_t e = 0;
  const __m256 k8 = _mm256_set1_ps(k);
  for (; e + 16 <= len; e += 16) {
    __m256 f0, f1;
    Widen16(src + e, &f0, &f1);
    if (kScale) {
      f0 = _mm256_mul_ps(f0, k8);
      f1 = _mm256_mul_ps(f1, k8);
    }
    _mm256_storeu_ps(dst + e, _mm256_sub_ps(_mm256_mul_ps(f0, _mm256_loadu_ps(a + e)),
                                            _mm256_loadu_ps(b + e)));
    _mm256_storeu_ps(dst + e + 8, _mm256_sub_ps(_mm256_mul_ps(f1, _mm256_loadu_ps(a + e + 8)),
                                                _mm256_loadu_ps(b + e + 8)));
  }
  for (; e < len; ++e) {
    float f = static_cast<float>(src[e]);
    if (kScale) f = f * k;
    dst[e] = f * a[e] - b[e];
  }
}

template <bool kLevels>
PIX_AVX void BrightnessAvx(float* __restrict x, int64_t len, float d) {
  int64_t e = 0;
  const __m256 d8 = _mm256_set1_ps(d);
  for (; e + 8 <= len; e += 8) {
    _mm256_storeu_ps(x + e, Out8<kLevels>(_mm256_add_ps(_mm256_loadu_ps(x + e), d8)));
  }
  for (; e < len; ++e) x[e] = Out<kLevels>(x[e] + d);
}

// (x - m) * f + m, clipped; then, with kNorm, StoreNorm's x * a - b into dst
// (streaming) instead of back into x: the last pass's contrast and store in one loop
template <bool kLevels, bool kNorm>
PIX_AVX void ContrastAvx(float* __restrict x, int64_t len, const float* __restrict m, float f,
                         const float* __restrict a, const float* __restrict b,
                         float* __restrict dst) {
  int64_t e = 0;
  const __m256 f8 = _mm256_set1_ps(f);
  auto one = [&](int64_t i) {
    const float y = Out<kLevels>((x[i] - m[i]) * f + m[i]);
    if (kNorm) {
      dst[i] = y * a[i] - b[i];
    } else {
      x[i] = y;
    }
  };
  if (kNorm) {
    for (; e < len && (reinterpret_cast<uintptr_t>(dst + e) & 31) != 0; ++e) one(e);
  }
  for (; e + 8 <= len; e += 8) {
    const __m256 m8 = _mm256_loadu_ps(m + e);
    const __m256 y = Out8<kLevels>(
        _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + e), m8), f8), m8));
    if (kNorm) {
      _mm256_stream_ps(dst + e, _mm256_sub_ps(_mm256_mul_ps(y, _mm256_loadu_ps(a + e)),
                                              _mm256_loadu_ps(b + e)));
    } else {
      _mm256_storeu_ps(x + e, y);
    }
  }
  for (; e < len; ++e) one(e);
}

PIX_AVX void StoreNormAvx(const float* __restrict x, int64_t len, const float* __restrict a,
                          const float* __restrict b, float* __restrict dst) {
  int64_t e = 0;
  for (; e < len && (reinterpret_cast<uintptr_t>(dst + e) & 31) != 0; ++e) {
    dst[e] = x[e] * a[e] - b[e];
  }
  for (; e + 8 <= len; e += 8) {
    _mm256_stream_ps(dst + e, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(x + e),
                                                          _mm256_loadu_ps(a + e)),
                                            _mm256_loadu_ps(b + e)));
  }
  for (; e < len; ++e) dst[e] = x[e] * a[e] - b[e];
}

PIX_AVX void AddToAvx(float* dst, const float* a, const float* b, int64_t len) {
  int64_t j = 0;
  for (; j + 8 <= len; j += 8) {
    _mm256_storeu_ps(dst + j, _mm256_add_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));
  }
  for (; j < len; ++j) dst[j] = a[j] + b[j];
}

// Saturation on 8 pixels at a time: two groups of 4 de-interleaved with Saturation3's
// SSE2 shuffles (moves only), the arithmetic on 8 lanes, re-interleaved the same way.
// The same operations as Saturation3's lanes (vmaxps/vminps select as maxps/minps;
// the compares give the same masks). Returns the pixels done (a multiple of 8).
PIX_AVX inline void Deint4(const float* q3, __m128* x0, __m128* x1, __m128* x2) {
  const __m128 i0 = _mm_loadu_ps(q3), i1 = _mm_loadu_ps(q3 + 4), i2 = _mm_loadu_ps(q3 + 8);
  *x0 = _mm_shuffle_ps(i0, _mm_shuffle_ps(i1, i2, _MM_SHUFFLE(1, 1, 2, 2)), _MM_SHUFFLE(2, 0, 3, 0));
  *x1 = _mm_shuffle_ps(_mm_shuffle_ps(i0, i1, _MM_SHUFFLE(0, 0, 1, 1)),
                       _mm_shuffle_ps(i1, i2, _MM_SHUFFLE(2, 2, 3, 3)), _MM_SHUFFLE(2, 0, 2, 0));
  *x2 = _mm_shuffle_ps(_mm_shuffle_ps(i0, i1, _MM_SHUFFLE(1, 1, 2, 2)), i2, _MM_SHUFFLE(3, 0, 2, 0));
}

PIX_AVX inline void Inter4(float* q3, __m128 o0, __m128 o1, __m128 o2) {
  const __m128 rg_lo = _mm_unpacklo_ps(o0, o1), rg_hi = _mm_unpackhi_ps(o0, o1);
  const __m128 gb_lo = _mm_unpacklo_ps(o1, o2), gb_hi = _mm_unpackhi_ps(o1, o2);
  _mm_storeu_ps(q3, _mm_shuffle_ps(rg_lo, _mm_shuffle_ps(o2, o0, _MM_SHUFFLE(1, 1, 0, 0)),
                                   _MM_SHUFFLE(2, 0, 1, 0)));
  _mm_storeu_ps(q3 + 4, _mm_shuffle_ps(gb_lo, rg_hi, _MM_SHUFFLE(1, 0, 3, 2)));
  _mm_storeu_ps(q3 + 8, _mm_shuffle_ps(_mm_shuffle_ps(o2, o0, _MM_SHUFFLE(3, 3, 2, 2)), gb_hi,
                                       _MM_SHUFFLE(3, 2, 2, 0)));
}

template <bool kLevels>
PIX_AVX int64_t SaturationAvx(float* __restrict x, int64_t px, float f) {
  const __m256 zero = _mm256_setzero_ps(), one = _mm256_set1_ps(1.0f), f8 = _mm256_set1_ps(f);
  int64_t i = 0;
  for (; i + 8 <= px; i += 8) {
    float* q3 = x + 3 * i;
    __m128 a0, a1, a2, b0, b1, b2;
    Deint4(q3, &a0, &a1, &a2);
    Deint4(q3 + 12, &b0, &b1, &b2);
    const __m256 x0 = _mm256_insertf128_ps(_mm256_castps128_ps256(a0), b0, 1);
    const __m256 x1 = _mm256_insertf128_ps(_mm256_castps128_ps256(a1), b1, 1);
    const __m256 x2 = _mm256_insertf128_ps(_mm256_castps128_ps256(a2), b2, 1);
    const __m256 mx = _mm256_max_ps(_mm256_max_ps(x0, x1), x2);
    const __m256 mn = _mm256_min_ps(_mm256_min_ps(x0, x1), x2);
    const __m256 chroma = _mm256_sub_ps(mx, mn);
    const __m256 isz = _mm256_cmp_ps(chroma, zero, _CMP_EQ_OQ);
    const __m256 den = _mm256_or_ps(_mm256_and_ps(isz, one), _mm256_andnot_ps(isz, chroma));
    const __m256 q = _mm256_andnot_ps(isz, _mm256_div_ps(mx, den));
    __m256 fq = _mm256_min_ps(f8, q);
    fq = _mm256_and_ps(_mm256_cmp_ps(chroma, zero, _CMP_GT_OS), fq);
    const __m256 o0 = Out8<kLevels>(_mm256_sub_ps(mx, _mm256_mul_ps(fq, _mm256_sub_ps(mx, x0))));
    const __m256 o1 = Out8<kLevels>(_mm256_sub_ps(mx, _mm256_mul_ps(fq, _mm256_sub_ps(mx, x1))));
    const __m256 o2 = Out8<kLevels>(_mm256_sub_ps(mx, _mm256_mul_ps(fq, _mm256_sub_ps(mx, x2))));
    Inter4(q3, _mm256_castps256_ps128(o0), _mm256_castps256_ps128(o1), _mm256_castps256_ps128(o2));
    Inter4(q3 + 12, _mm256_extractf128_ps(o0, 1), _mm256_extractf128_ps(o1, 1),
           _mm256_extractf128_ps(o2, 1));
  }
  return i;
}
#endif

// Pixels per block. Every pass works block by block on interleaved values
// (channel = element index % c, as in the tensor), so a block's floats stay in L1
// while the ops between two barriers run over it one after the other.
constexpr int64_t kBlock = 256;

// x[e] = float(src[e]) * k (k = 1/255, or 1 for levels: x * 1 is exact)
void LoadU8(const uint8_t* __restrict src, int64_t len, float k, float* __restrict x) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return LoadU8Avx(src, len, k, x);
#endif
  int64_t e = 0;
#if defined(__SSE2__)
  // SSE2 has no pmovzx: zero-extend by unpacking with zeros, then cvtdq2ps (exact)
  const __m128i z = _mm_setzero_si128();
  const __m128 k4 = _mm_set1_ps(k);
  for (; e + 16 <= len; e += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + e));
    const __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
    _mm_storeu_ps(x + e, _mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(lo, z)), k4));
    _mm_storeu_ps(x + e + 4, _mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(lo, z)), k4));
    _mm_storeu_ps(x + e + 8, _mm_mul_ps(_mm_cvtepi32_ps(_mm_unpacklo_epi16(hi, z)), k4));
    _mm_storeu_ps(x + e + 12, _mm_mul_ps(_mm_cvtepi32_ps(_mm_unpackhi_epi16(hi, z)), k4));
  }
#endif
  for (; e < len; ++e) x[e] = static_cast<float>(src[e]) * k;
}

// normalize alone from uint8: dst[e] = (float(src[e]) * k) * a[e] - b[e], one pass;
// kScale false: k = 1, whose multiply is exact and left out
template <bool kScale>
void LoadNormU8(const uint8_t* __restrict src, int64_t len, float k, const float* __restrict a,
                const float* __restrict b, float* __restrict dst) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return LoadNormU8Avx<kScale>(src, len, k, a, b, dst);
#endif
  int64_t e = 0;
#if defined(__SSE2__)
  const __m128i z = _mm_setzero_si128();
  const __m128 k4 = _mm_set1_ps(k);
  auto one = [&](__m128i w, int64_t o) {
    __m128 f = _mm_cvtepi32_ps(w);
    if (kScale) f = _mm_mul_ps(f, k4);
    _mm_storeu_ps(dst + e + o, _mm_sub_ps(_mm_mul_ps(f, _mm_loadu_ps(a + o)), _mm_loadu_ps(b + o)));
  };
  for (; e + 16 <= len; e += 16, a += 16, b += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + e));
    const __m128i lo = _mm_unpacklo_epi8(v, z), hi = _mm_unpackhi_epi8(v, z);
    one(_mm_unpacklo_epi16(lo, z), 0);
    one(_mm_unpackhi_epi16(lo, z), 4);
    one(_mm_unpacklo_epi16(hi, z), 8);
    one(_mm_unpackhi_epi16(hi, z), 12);
  }
  a -= e;
  b -= e;
#endif
  for (; e < len; ++e) {
    float f = static_cast<float>(src[e]);
    if (kScale) f = f * k;
    dst[e] = f * a[e] - b[e];
  }
}

// normalize: dst[e] = x[e] * a[e] - b[e] (a, b: the per-channel constants of a block)
void StoreNorm(const float* __restrict x, int64_t len, const float* __restrict a,
               const float* __restrict b, float* __restrict dst) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return StoreNormAvx(x, len, a, b, dst);
#endif
  int64_t e = 0;
#if defined(__SSE2__)
  // streaming stores (a float batch is larger than the caches; no read of the lines
  // before they are written), from the first 16-byte boundary of dst
  for (; e < len && (reinterpret_cast<uintptr_t>(dst + e) & 15) != 0; ++e) {
    dst[e] = x[e] * a[e] - b[e];
  }
  for (; e + 4 <= len; e += 4) {
    _mm_stream_ps(dst + e, _mm_sub_ps(_mm_mul_ps(_mm_loadu_ps(x + e), _mm_loadu_ps(a + e)),
                                      _mm_loadu_ps(b + e)));
  }
#endif
  for (; e < len; ++e) dst[e] = x[e] * a[e] - b[e];
}

// uint8 levels out: exact integers in [0, 255], so truncation and the saturating
// packs are exact too
void StoreU8(const float* __restrict x, int64_t len, uint8_t* __restrict dst) {
  int64_t e = 0;
#if defined(__SSE2__)
  for (; e + 16 <= len; e += 16) {
    const __m128i a = _mm_packs_epi32(_mm_cvttps_epi32(_mm_loadu_ps(x + e)),
                                      _mm_cvttps_epi32(_mm_loadu_ps(x + e + 4)));
    const __m128i b = _mm_packs_epi32(_mm_cvttps_epi32(_mm_loadu_ps(x + e + 8)),
                                      _mm_cvttps_epi32(_mm_loadu_ps(x + e + 12)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + e), _mm_packus_epi16(a, b));
  }
#endif
  for (; e < len; ++e) dst[e] = static_cast<uint8_t>(static_cast<int32_t>(x[e]));
}

// acc[e] += int(x[e]) for integer levels in [0, 255]: exact, so the order of the
// additions does not matter (int32 holds 255 * 2^23 blocks)
void AccInt(const float* __restrict x, int64_t len, int32_t* __restrict acc) {
  int64_t e = 0;
#if defined(__SSE2__)
  for (; e + 4 <= len; e += 4) {
    __m128i* q = reinterpret_cast<__m128i*>(acc + e);
    _mm_storeu_si128(q, _mm_add_epi32(_mm_loadu_si128(q), _mm_cvttps_epi32(_mm_loadu_ps(x + e))));
  }
#endif
  for (; e < len; ++e) acc[e] += static_cast<int32_t>(x[e]);
}

// brightness: x + d, clipped (levels: rounded first)
template <bool kLevels>
void Brightness(float* __restrict x, int64_t len, float d) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return BrightnessAvx<kLevels>(x, len, d);
#endif
  int64_t e = 0;
#if defined(__SSE2__)
  const __m128 d4 = _mm_set1_ps(d);
  for (; e + 4 <= len; e += 4) _mm_storeu_ps(x + e, Out4<kLevels>(_mm_add_ps(_mm_loadu_ps(x + e), d4)));
#endif
  for (; e < len; ++e) x[e] = Out<kLevels>(x[e] + d);
}

// contrast: (x - m) * f + m, clipped (levels: rounded first); m[e]: the mean of
// element e's channel
template <bool kLevels>
void Contrast(float* __restrict x, int64_t len, const float* __restrict m, float f) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return ContrastAvx<kLevels, false>(x, len, m, f, nullptr, nullptr, nullptr);
#endif
  int64_t e = 0;
#if defined(__SSE2__)
  const __m128 f4 = _mm_set1_ps(f);
  for (; e + 4 <= len; e += 4) {
    const __m128 m4 = _mm_loadu_ps(m + e);
    _mm_storeu_ps(x + e, Out4<kLevels>(_mm_add_ps(_mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + e), m4), f4), m4)));
  }
#endif
  for (; e < len; ++e) x[e] = Out<kLevels>((x[e] - m[e]) * f + m[e]);
}

// saturation of px interleaved RGB pixels: v - q * (v - x), q = min(f, v / chroma)
// (0 where chroma is 0), clipped (levels: rounded first)
template <bool kLevels>
void Saturation3(float* __restrict x, int64_t px, float f) {
  int64_t i = 0;
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) i = SaturationAvx<kLevels>(x, px, f);
#endif
#if defined(__SSE2__)
  const __m128 zero = _mm_setzero_ps(), one = _mm_set1_ps(1.0f), f4 = _mm_set1_ps(f);
  for (; i + 4 <= px; i += 4) {
    float* q3 = x + 3 * i;
    // 4 pixels (r0 g0 b0 r1) (g1 b1 r2 g2) (b2 r3 g3 b3) -> r, g, b (moves only)
    const __m128 i0 = _mm_loadu_ps(q3), i1 = _mm_loadu_ps(q3 + 4), i2 = _mm_loadu_ps(q3 + 8);
    const __m128 x0 = _mm_shuffle_ps(i0, _mm_shuffle_ps(i1, i2, _MM_SHUFFLE(1, 1, 2, 2)),
                                     _MM_SHUFFLE(2, 0, 3, 0));
    const __m128 x1 = _mm_shuffle_ps(_mm_shuffle_ps(i0, i1, _MM_SHUFFLE(0, 0, 1, 1)),
                                     _mm_shuffle_ps(i1, i2, _MM_SHUFFLE(2, 2, 3, 3)),
                                     _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 x2 = _mm_shuffle_ps(_mm_shuffle_ps(i0, i1, _MM_SHUFFLE(1, 1, 2, 2)), i2,
                                     _MM_SHUFFLE(3, 0, 2, 0));
    const __m128 mx = _mm_max_ps(_mm_max_ps(x0, x1), x2);
    const __m128 mn = _mm_min_ps(_mm_min_ps(x0, x1), x2);
    const __m128 chroma = _mm_sub_ps(mx, mn);
    const __m128 isz = _mm_cmpeq_ps(chroma, zero);
    const __m128 den = _mm_or_ps(_mm_and_ps(isz, one), _mm_andnot_ps(isz, chroma));
    const __m128 q = _mm_andnot_ps(isz, _mm_div_ps(mx, den));
    __m128 fq = _mm_min_ps(f4, q);
    fq = _mm_and_ps(_mm_cmpgt_ps(chroma, zero), fq);
    const __m128 o0 = Out4<kLevels>(_mm_sub_ps(mx, _mm_mul_ps(fq, _mm_sub_ps(mx, x0))));
    const __m128 o1 = Out4<kLevels>(_mm_sub_ps(mx, _mm_mul_ps(fq, _mm_sub_ps(mx, x1))));
    const __m128 o2 = Out4<kLevels>(_mm_sub_ps(mx, _mm_mul_ps(fq, _mm_sub_ps(mx, x2))));
    // r, g, b -> interleaved (moves only)
    const __m128 rg_lo = _mm_unpacklo_ps(o0, o1), rg_hi = _mm_unpackhi_ps(o0, o1);
    const __m128 gb_lo = _mm_unpacklo_ps(o1, o2), gb_hi = _mm_unpackhi_ps(o1, o2);
    _mm_storeu_ps(q3, _mm_shuffle_ps(rg_lo, _mm_shuffle_ps(o2, o0, _MM_SHUFFLE(1, 1, 0, 0)),
                                     _MM_SHUFFLE(2, 0, 1, 0)));
    _mm_storeu_ps(q3 + 4, _mm_shuffle_ps(gb_lo, rg_hi, _MM_SHUFFLE(1, 0, 3, 2)));
    _mm_storeu_ps(q3 + 8, _mm_shuffle_ps(_mm_shuffle_ps(o2, o0, _MM_SHUFFLE(3, 3, 2, 2)), gb_hi,
                                         _MM_SHUFFLE(3, 2, 2, 0)));
  }
#endif
  for (; i < px; ++i) {
    float* p = x + 3 * i;
    const float x0 = p[0], x1 = p[1], x2 = p[2];
    float mx = x0 > x1 ? x0 : x1;
    mx = mx > x2 ? mx : x2;
    float mn = x0 < x1 ? x0 : x1;
    mn = mn < x2 ? mn : x2;
    const float chroma = mx - mn;
    // divide_no_nan
    const float q0 = mx / (chroma == 0.0f ? 1.0f : chroma);
    const float q = chroma == 0.0f ? 0.0f : q0;
    float fq = f < q ? f : q;  // minimum(factor, q)
    fq = chroma > 0.0f ? fq : 0.0f;
    p[0] = Out<kLevels>(mx - fq * (mx - x0));
    p[1] = Out<kLevels>(mx - fq * (mx - x1));
    p[2] = Out<kLevels>(mx - fq * (mx - x2));
  }
}


// dst[j] = a[j] + b[j]; dst may be a (each lane reads before it writes; b is disjoint)
void AddTo(float* dst, const float* a, const float* b, int64_t len) {
#ifdef TFPIPE_PIX_AVX
  if (PixAvx()) return AddToAvx(dst, a, b, len);
#endif
  int64_t j = 0;
#if defined(__SSE2__)
  for (; j + 4 <= len; j += 4) {
    _mm_storeu_ps(dst + j, _mm_add_ps(_mm_loadu_ps(a + j), _mm_loadu_ps(b + j)));
  }
#endif
  for (; j < len; ++j) dst[j] = a[j] + b[j];
}

// Half the padded length of color._pairwise_sum's tree over n values.
inline int64_t TreeHalf(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p / 2;
}

// color._pairwise_sum of every channel of n interleaved pixels v[0..n*c), at once:
// pad to a power of two p with zeros, add the upper half to the lower half until one
// value is left. Pixel i's channel ch is v[c*i + ch], so pixel i + h is c*h elements
// on, and one halving over the interleaved array is the halving of every channel: the
// same pairs, added in the same order, as per channel. t needs c * TreeHalf(n) floats.
void TreeSums(const float* v, int64_t n, int64_t c, float* t, float* sums) {
  if (n == 1) {
    for (int64_t ch = 0; ch < c; ++ch) sums[ch] = v[ch];
    return;
  }
  int64_t h = TreeHalf(n);  // h < n <= 2h
  AddTo(t, v, v + c * h, c * (n - h));
  for (int64_t j = c * (n - h); j < c * h; ++j) t[j] = v[j] + 0.0f;  // the zero padding, added
  while (h > 1) {
    h >>= 1;
    AddTo(t, t, t + c * h, c * h);
  }
  for (int64_t ch = 0; ch < c; ++ch) sums[ch] = t[ch];
}

struct Step {
  Kind kind;
  float v;
};

// One shard's buffers (uninitialized: every element is written before it is read).
struct Scratch {
  std::unique_ptr<float[]> image;  // n * c: the values at a contrast barrier
  std::unique_ptr<float[]> tree;   // c * TreeHalf(n): the float means' tree
  std::unique_ptr<float[]> block;  // kBlock * c: a block when the chain has no barrier
  std::unique_ptr<float[]> block2;  // kBlock * c: FoldTree's second block, recomputed
  std::unique_ptr<float[]> mean;   // kBlock * c: the contrast means, per element of a block
  std::unique_ptr<int32_t[]> acc;  // kBlock * c: the levels sums, per element of a block
  std::unique_ptr<float[]> zeros;  // kBlock * c zeros: the tree's padding
  std::vector<Step> steps;
  std::vector<float> m;
  std::vector<int64_t> sums;
  std::vector<int> level;  // FoldTree's stack: the tree level of each partial sum
};

// PixelIo: where one call of PixelChain::Image reads and writes. Image `img` of
// [*, n pixels, c channels] at offset img * n * c of in8/inf and outf/out8; its
// params/apply rows at img * n_ops.
struct PixelIo {
  int64_t n, c;
  const float* prm;
  const bool* app;
  const uint8_t* in8;
  const float* inf;
  float* outf;
  uint8_t* out8;
  const float* na;
  const float* nb;
};

// The chain of one op configuration (ops in order, gated flags, to_float, normalize,
// mean/std), applied image by image: what TfpipePixelChain runs per image, and what
// TfpipeDecodeCropResizeBlock (window_decode_block.cc) runs on each decoded row while
// it is still in L2 (its fused write-out). One definition, so both give the same bytes.
class PixelChain {
 public:
  // Parses the attributes' values; an error names the bad one.
  Status Init(const std::vector<std::string>& ops, const std::vector<bool>& gated,
              bool to_float, bool normalize, const std::vector<float>& mean,
              const std::vector<float>& std) {
    if (gated.size() != ops.size()) {
      return errors::InvalidArgument("gated must have one flag per op, got ", gated.size(),
                                     " for ", ops.size(), " ops");
    }
    kinds_.clear();
    for (const auto& name : ops) {
      if (name == "brightness") {
        kinds_.push_back(Kind::kBrightness);
      } else if (name == "contrast") {
        kinds_.push_back(Kind::kContrast);
      } else if (name == "saturation") {
        kinds_.push_back(Kind::kSaturation);
      } else {
        return errors::InvalidArgument("ops: unknown colour op '", name,
                                       "'; allowed: brightness, contrast, saturation");
      }
    }
    gated_ = gated;
    to_float_ = to_float;
    normalize_ = normalize;
    mean_ = mean;
    std_ = std;
    if (normalize_ && (mean_.empty() || mean_.size() != std_.size())) {
      return errors::InvalidArgument("normalize needs mean and std of the same length");
    }
    has_contrast_ = std::find(kinds_.begin(), kinds_.end(), Kind::kContrast) != kinds_.end();
    return absl::OkStatus();
  }

  int64_t n_ops() const { return static_cast<int64_t>(kinds_.size()); }
  bool to_float() const { return to_float_; }
  bool normalize() const { return normalize_; }
  bool float_out() const { return normalize_ || to_float_; }

  // Whether images of c channels can go through the chain.
  Status Check(int64_t c) const {
    for (Kind k : kinds_) {
      if (k == Kind::kSaturation && c != 3) {
        return errors::InvalidArgument("saturation needs 3 channels, got ", c);
      }
    }
    if (normalize_ && mean_.size() != 1 && static_cast<int64_t>(mean_.size()) != c) {
      return errors::InvalidArgument("normalize.mean/std must have 1 or ", c,
                                     " values, got ", mean_.size());
    }
    return absl::OkStatus();
  }

  // normalize: x * (1 / (scale * std)) - mean / std, as color.normalize computes
  // its constants (float32, scale = 255 for uint8 levels, 1 for [0,1] floats),
  // laid out per element of a block (element e is channel e % c)
  void Constants(int64_t c, std::vector<float>* na, std::vector<float>* nb) const {
    na->clear();
    nb->clear();
    if (!normalize_) return;
    const int64_t block = kBlock * c;
    const float scale = to_float_ ? 1.0f : 255.0f;
    na->resize(block);
    nb->resize(block);
    for (int64_t e = 0; e < block; ++e) {
      const int64_t k = e % c;
      const float m = mean_[mean_.size() == 1 ? 0 : k], s = std_[std_.size() == 1 ? 0 : k];
      (*na)[e] = 1.0f / (scale * s);
      (*nb)[e] = m / s;
    }
  }

  // One thread's buffers for images of n pixels and c channels.
  void InitScratch(int64_t n, int64_t c, Scratch* s) const {
    const int64_t block = kBlock * c;
    if (has_contrast_) {
      s->image.reset(new float[n * c]);
      if (to_float_) {
        // TreeSums' array, or FoldTree's stack (one block per level, + 1)
        int64_t levels = 2;
        while ((int64_t{1} << levels) < n) ++levels;
        s->tree.reset(new float[std::max<int64_t>(c * TreeHalf(n), block * (levels + 1))]);
        s->zeros.reset(new float[block]());
        s->level.resize(levels + 1);
      }
    }
    s->block.reset(new float[block]);
    s->block2.reset(new float[block]);
    s->mean.reset(new float[block]);
    s->acc.reset(new int32_t[block]);
    s->steps.reserve(kinds_.size());
    s->m.resize(c);
    s->sums.resize(c);
  }

  // Runs steps [from, to) (no contrast among them) on a block of px pixels.
  void Ops(const Scratch& s, size_t from, size_t to, float* x, int64_t px, int64_t c) const {
    const int64_t len = px * c;
    for (size_t j = from; j < to; ++j) {
      const Step& st = s.steps[j];
      if (st.kind == Kind::kBrightness) {
        // x + delta * scale (scale 1: delta itself)
        if (to_float_) {
          Brightness<false>(x, len, st.v);
        } else {
          Brightness<true>(x, len, st.v * 255.0f);
        }
      } else if (to_float_) {  // saturation (c == 3, checked)
        Saturation3<false>(x, px, st.v);
      } else {
        Saturation3<true>(x, px, st.v);
      }
    }
  }

  // The output of a block: normalize, the [0,1] floats, or the uint8 levels.
  void Store(const PixelIo& io, const float* x, int64_t at, int64_t len) const {
    if (normalize_) {
      StoreNorm(x, len, io.na, io.nb, io.outf + at);
    } else if (to_float_) {
      std::memcpy(io.outf + at, x, len * sizeof(float));
    } else {
      StoreU8(x, len, io.out8 + at);
    }
  }

 public:
  // One image, by one thread, in a fixed order. The passes: load + the ops before the
  // first contrast; at each contrast (the one barrier: its channel means need every
  // pixel) the means of the whole image, then that contrast + the ops up to the next
  // one; the last pass also stores the output. Each pass goes block by block; per
  // element the operations are the twin's, in its order.
  void Image(int64_t img, const PixelIo& io, Scratch& s) const {
    const int64_t n = io.n, c = io.c, block = kBlock * c, base = img * n * c;
    const float* prm = io.prm + img * static_cast<int64_t>(kinds_.size());
    const bool* app = io.app + img * static_cast<int64_t>(kinds_.size());
    s.steps.clear();
    for (size_t j = 0; j < kinds_.size(); ++j) {
      if (gated_[j] && !app[j]) continue;  // where(apply, out, y) with apply false = y
      s.steps.push_back({kinds_[j], prm[j]});
    }
    const size_t n_steps = s.steps.size();
    // load: tf.cast(x, float32) * (1 / 255) (float chain) or the uint8 levels as floats
    const float k = to_float_ ? static_cast<float>(1.0 / 255.0) : 1.0f;
    if (n_steps == 0 && normalize_ && io.in8 != nullptr) {  // normalize alone: one pass
      for (int64_t e0 = 0; e0 < n * c; e0 += block) {
        const int64_t len = std::min(block, n * c - e0);
        if (to_float_) {
          LoadNormU8<true>(io.in8 + base + e0, len, k, io.na, io.nb, io.outf + base + e0);
        } else {
          LoadNormU8<false>(io.in8 + base + e0, len, k, io.na, io.nb, io.outf + base + e0);
        }
      }
      return;
    }
    size_t first = 0;
    while (first < n_steps && s.steps[first].kind != Kind::kContrast) ++first;
    const bool barrier = first < n_steps;
    const bool levels = !to_float_;
    bool fuse_bright0 = false;  // the load and a first brightness in one loop
#ifdef TFPIPE_PIX_AVX
    fuse_bright0 = io.in8 != nullptr && first > 0 && s.steps[0].kind == Kind::kBrightness &&
                   PixAvx();
#endif
    // Recompute: with one contrast and uint8 input, the values before the contrast are
    // computed again, block by block, from the uint8 pixels (in L1/L2) for the mean and
    // for the last pass, instead of kept in s.image (n * c floats: 602 KB at 224x224,
    // which evicts what the block op's decode keeps in L2). The same operations on the
    // same inputs: the same values, so the same bytes.
    int contrasts = 0;
    for (const Step& st : s.steps) contrasts += st.kind == Kind::kContrast ? 1 : 0;
    const bool recompute = barrier && contrasts == 1 && io.in8 != nullptr &&
                           (levels || TreeHalf(n) >= kBlock);
    // load + steps [0, first) on the px pixels from i0 into x: the first pass's block
    auto load0 = [&](int64_t i0, int64_t px, float* x) {
      const int64_t e0 = i0 * c, len = px * c;
#ifdef TFPIPE_PIX_AVX
      if (fuse_bright0) {
        const float d = s.steps[0].v;
        if (levels) {
          LoadBrightU8Avx<true>(io.in8 + base + e0, len, k, d * 255.0f, x);
        } else {
          LoadBrightU8Avx<false>(io.in8 + base + e0, len, k, d, x);
        }
      }
#endif
      if (!fuse_bright0) LoadU8(io.in8 + base + e0, len, k, x);
      Ops(s, fuse_bright0 ? 1 : 0, first, x, px, c);
    };
    // One pass: steps [from, to) on every block of pixels, after the load (j < 0) or
    // after contrast j; the last pass stores the output, any other ends at a contrast,
    // whose channel means it leaves in s.m.
    auto pass = [&](int64_t j, size_t from, size_t to) {
      const bool last = to == n_steps;
      bool fuse_bright = false;
#ifdef TFPIPE_PIX_AVX
      fuse_bright = j < 0 && io.in8 != nullptr && from < to &&
                    s.steps[from].kind == Kind::kBrightness && PixAvx();
#endif
      auto run = [&](int64_t i0) {  // the block of pixels [i0, i0 + kBlock)
        const int64_t px = std::min(kBlock, n - i0), e0 = i0 * c, len = px * c;
        float* x = barrier && !recompute ? s.image.get() + e0 : s.block.get();
        if (recompute && j >= 0) load0(i0, px, x);  // the values at the contrast, again
#ifdef TFPIPE_PIX_AVX
        // the last pass is this contrast alone, then normalize: one loop, x to the output
        if (j >= 0 && last && from == to && normalize_ && PixAvx()) {
          if (levels) {
            ContrastAvx<true, true>(x, len, s.mean.get(), s.steps[j].v, io.na, io.nb,
                                    io.outf + base + e0);
          } else {
            ContrastAvx<false, true>(x, len, s.mean.get(), s.steps[j].v, io.na, io.nb,
                                     io.outf + base + e0);
          }
          return;
        }
#endif
        if (j < 0 && io.inf != nullptr) {
          std::memcpy(x, io.inf + base + e0, len * sizeof(float));
        } else if (j < 0 && fuse_bright) {  // the load and the first op, a brightness
          const float d = s.steps[from].v;
          if (levels) {
            LoadBrightU8Avx<true>(io.in8 + base + e0, len, k, d * 255.0f, x);
          } else {
            LoadBrightU8Avx<false>(io.in8 + base + e0, len, k, d, x);
          }
        } else if (j < 0) {
          LoadU8(io.in8 + base + e0, len, k, x);
        } else if (levels) {
          Contrast<true>(x, len, s.mean.get(), s.steps[j].v);
        } else {
          Contrast<false>(x, len, s.mean.get(), s.steps[j].v);
        }
        Ops(s, from + (j < 0 && fuse_bright ? 1 : 0), to, x, px, c);
        if (last) {
          Store(io, x, base + e0, len);
        } else if (levels) {
          AccInt(x, len, s.acc.get());
        }
      };
      if (!last && levels) std::fill(s.acc.get(), s.acc.get() + block, 0);
      // (recompute, floats: the first pass's blocks are made in FoldTree's order)
      if (last || levels || !recompute) {
        for (int64_t i0 = 0; i0 < n; i0 += kBlock) run(i0);
      }
      if (last) return;
      if (levels) {  // exact integer sums
        std::fill(s.sums.begin(), s.sums.end(), 0);
        for (int64_t e = 0; e < std::min(block, n * c); ++e) s.sums[e % c] += s.acc[e];
      } else if (recompute) {
        FoldTree(n, c, s, [&](int64_t kb, int which) -> const float* {
          float* b = which ? s.block2.get() : s.block.get();
          load0(kb * kBlock, std::min(kBlock, n - kb * kBlock), b);
          return b;
        });
      } else if (TreeHalf(n) >= kBlock) {
        FoldTree(n, c, s, [&](int64_t kb, int) -> const float* {
          return s.image.get() + kb * block;
        });
      } else {
        TreeSums(s.image.get(), n, c, s.tree.get(), s.m.data());
      }
      // the channel means, as color.adjust_contrast takes them: the integer sum
      // divided in double and rounded once to float, or the tree's sum * (1 / n)
      for (int64_t ch = 0; ch < c; ++ch) {
        s.m[ch] = levels ? static_cast<float>(static_cast<double>(s.sums[ch]) *
                                              (1.0 / static_cast<double>(n)))
                         : s.m[ch] * (1.0f / static_cast<float>(n));
      }
      for (int64_t e = 0; e < block; ++e) s.mean[e] = s.m[e % c];
    };
    pass(-1, 0, first);
    for (size_t j = first; j < n_steps;) {  // s.steps[j] is a contrast
      size_t next = j + 1;
      while (next < n_steps && s.steps[next].kind != Kind::kContrast) ++next;
      pass(static_cast<int64_t>(j), j + 1, next);
      j = next;
    }
  }

 private:
  // TreeSums of s.image into s.m with the same additions, in L1-sized pieces: with p = 2 * TreeHalf(n) padded pixels in nb = p / kBlock
  // blocks, the tree's levels down to h = kBlock add whole blocks (block k + block
  // k + h / kBlock, lane by lane), a halving tree over blocks. Computed depth first
  // (blocks in bit-reversed order, a stack of partial sums: each add has the operands
  // the level-by-level order gives it, lower index on the left), then the levels inside
  // the last block. Block k < nb / 2 is all pixels (k * kBlock < p / 2 < n); its partner
  // k + nb / 2 may be partly or wholly padding, the zeros added as TreeSums adds them.
  // src(k, which) gives block k's values (which: 0 or 1, the buffer to use for it).
  template <class Src>
  void FoldTree(int64_t n, int64_t c, Scratch& s, Src src) const {
    const int64_t block = kBlock * c, nb = 2 * TreeHalf(n) / kBlock;
    int bits = 0;
    while ((int64_t{1} << bits) < nb) ++bits;
    int depth = 0;
    auto slot = [&](int d) { return s.tree.get() + d * block; };
    for (int64_t t = 0; t < nb; t += 2) {
      int64_t k = 0;  // bit reversal of t
      for (int b = 0; b < bits; ++b) k |= ((t >> b) & 1) << (bits - 1 - b);
      const float* x = src(k, 0);
      const int64_t k2 = k + nb / 2;
      float* top = slot(depth);
      int64_t real = 0;  // elements of block k2 that are pixels
      if (k2 * kBlock < n) {
        const float* x2 = src(k2, 1);
        real = std::min(kBlock, n - k2 * kBlock) * c;
        AddTo(top, x, x2, real);
      }
      AddTo(top + real, x + real, s.zeros.get(), block - real);
      s.level[depth++] = 1;
      while (depth >= 2 && s.level[depth - 1] == s.level[depth - 2]) {
        AddTo(slot(depth - 2), slot(depth - 2), slot(depth - 1), block);
        ++s.level[depth - 2];
        --depth;
      }
    }
    float* t = slot(0);
    for (int64_t h = kBlock; h > 1;) {
      h >>= 1;
      AddTo(t, t, t + c * h, c * h);
    }
    for (int64_t ch = 0; ch < c; ++ch) s.m[ch] = t[ch];
  }

  std::vector<Kind> kinds_;
  std::vector<bool> gated_;
  std::vector<float> mean_, std_;
  bool to_float_ = true, normalize_ = false, has_contrast_ = false;
};

class PixelChainOp : public OpKernel {
 public:
  explicit PixelChainOp(OpKernelConstruction* ctx)
      : OpKernel(ctx), baseline_(IsaBaselineAttr(ctx)) {
    std::vector<std::string> ops;
    std::vector<bool> gated;
    bool to_float = true, normalize = false;
    std::vector<float> mean, std;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ops", &ops));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("gated", &gated));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("to_float", &to_float));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("normalize", &normalize));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("mean", &mean));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("std", &std));
    OP_REQUIRES_OK(ctx, chain_.Init(ops, gated, to_float, normalize, mean, std));
    DataType in, out;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("T", &in));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("out_dtype", &out));
    float_in_ = in == DT_FLOAT;
    OP_REQUIRES(ctx, !float_in_ || to_float,
                errors::InvalidArgument("a float32 input needs to_float=true"));
    OP_REQUIRES(ctx, (out == DT_FLOAT) == chain_.float_out(),
                errors::InvalidArgument("out_dtype must be float32 when to_float or "
                                        "normalize is set, else uint8"));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    const Tensor& params = ctx->input(1);
    const Tensor& apply = ctx->input(2);
    const int64_t n_ops = chain_.n_ops();
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
    OP_REQUIRES_OK(ctx, chain_.Check(c));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    const int64_t n = h * w;
    if (b == 0 || n == 0 || c == 0) return;

    std::vector<float> na, nb;
    chain_.Constants(c, &na, &nb);
    PixelIo io;
    io.n = n;
    io.c = c;
    io.prm = params.flat<float>().data();
    io.app = apply.flat<bool>().data();
    io.in8 = float_in_ ? nullptr : images.flat<uint8_t>().data();
    io.inf = float_in_ ? images.flat<float>().data() : nullptr;
    const bool float_out = chain_.float_out();
    io.outf = float_out ? out->flat<float>().data() : nullptr;
    io.out8 = float_out ? nullptr : out->flat<uint8_t>().data();
    io.na = na.data();
    io.nb = nb.data();

    auto run = [&](int64_t start, int64_t limit) {
      IsaScope isa(baseline_);  // on this Shard task's thread
      Scratch s;
      chain_.InitScratch(n, c, &s);
      for (int64_t img = start; img < limit; ++img) chain_.Image(img, io, s);
#if defined(__SSE2__)
      _mm_sfence();  // the streaming stores are visible before the shard reports done
#endif
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const int64_t cost = n * c * (4 + 4 * n_ops);  // rough cycles per image
    Shard(workers->num_threads, workers->workers, b, cost, run);
  }

 private:
  const bool baseline_;
  PixelChain chain_;
  bool float_in_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipePixelChain").Device(DEVICE_CPU), PixelChainOp);
