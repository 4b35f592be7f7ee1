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
// element of a block), with SSE2 loops (x86-64 baseline, no dispatch; each lane is
// the scalar loop's IEEE operation). The only barrier is contrast's channel mean, so
// a chain runs as one pass per contrast + 1: load + the ops before the first
// contrast; then each contrast + the ops up to the next one; the last pass writes
// the output (streaming stores for float32). The ops between two barriers run over
// one block while it is in L1. A pass before a contrast keeps the image's values
// (n * c floats, in L2 at 224x224) and their means: levels as exact int32 sums per
// element of a block, floats as the tree computed block-wise from L2 (FoldTree).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/platform/mem.h"
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

// Pixels per block. Every pass works block by block on interleaved values
// (channel = element index % c, as in the tensor), so a block's floats stay in L1
// while the ops between two barriers run over it one after the other.
constexpr int64_t kBlock = 256;

// x[e] = float(src[e]) * k (k = 1/255, or 1 for levels: x * 1 is exact)
void LoadU8(const uint8_t* __restrict src, int64_t len, float k, float* __restrict x) {
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

// dst[e] = x[e], streaming stores from dst's first 16-byte boundary (as StoreNorm)
void StreamCopy(const float* __restrict x, int64_t len, float* __restrict dst) {
  int64_t e = 0;
#if defined(__SSE2__)
  for (; e < len && (reinterpret_cast<uintptr_t>(dst + e) & 15) != 0; ++e) dst[e] = x[e];
  for (; e + 4 <= len; e += 4) _mm_stream_ps(dst + e, _mm_loadu_ps(x + e));
#endif
  for (; e < len; ++e) dst[e] = x[e];
}

// The table path's gathers: element e (channel e % c, counted from a pixel's first
// channel) is t[(e % c) * 256 + src[e]], t a channel-major table [c][256]. Moves only.
template <typename T>
void Gather(const uint8_t* __restrict src, int64_t px, int64_t c, const T* __restrict t,
            T* __restrict dst) {
  if (c == 3) {
    const T *t0 = t, *t1 = t + 256, *t2 = t + 512;
    for (int64_t i = 0; i < px; ++i, src += 3, dst += 3) {
      dst[0] = t0[src[0]];
      dst[1] = t1[src[1]];
      dst[2] = t2[src[2]];
    }
  } else if (c == 1) {
    for (int64_t i = 0; i < px; ++i) dst[i] = t[src[i]];
  } else {
    for (int64_t i = 0; i < px; ++i, src += c, dst += c) {
      for (int64_t ch = 0; ch < c; ++ch) dst[ch] = t[ch * 256 + src[ch]];
    }
  }
}

// Where the op's large float outputs live: freed buffers are kept (up to kKeep bytes)
// and handed out again for the same size. A float32 batch (38.5 MB at 64x224x224x3) is
// above glibc's largest mmap threshold (32 MB), so the default allocator maps fresh
// pages for every batch and the kernel faults in and zeroes each of them: measured
// here as much as the whole float32 write (benchmarks/writeout_bench.py). Reused
// pages are already mapped. Only where memory comes from changes, never a value.
class PixelOutBuffers : public Allocator {
 public:
  static constexpr size_t kMin = size_t{1} << 20;   // smaller outputs: TF's allocator
  static constexpr size_t kKeep = size_t{256} << 20;  // freed bytes kept at most
  static PixelOutBuffers* Get() {
    static PixelOutBuffers* a = new PixelOutBuffers;  // never destroyed: tensors outlive ops
    return a;
  }
  std::string Name() override { return "tfpipe_pixel_out"; }
  void* AllocateRaw(size_t alignment, size_t num_bytes) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t i = 0; i < free_.size(); ++i) {
        if (free_[i].second == num_bytes) {
          void* p = free_[i].first;
          free_[i] = free_.back();
          free_.pop_back();
          kept_ -= num_bytes;
          return p;
        }
      }
    }
    void* p = port::AlignedMalloc(num_bytes, static_cast<int>(std::max<size_t>(alignment, 64)));
    if (p != nullptr) {
      std::lock_guard<std::mutex> lock(mu_);
      size_[p] = num_bytes;
    }
    return p;
  }
  void DeallocateRaw(void* ptr) override {
    if (ptr == nullptr) return;
    std::vector<void*> drop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t bytes = size_[ptr];
      free_.emplace_back(ptr, bytes);
      kept_ += bytes;
      // keep the newest: free the oldest buffers beyond the budget
      while (kept_ > kKeep && !free_.empty()) {
        drop.push_back(free_.front().first);
        kept_ -= free_.front().second;
        size_.erase(free_.front().first);
        free_.erase(free_.begin());
      }
    }
    for (void* p : drop) port::AlignedFree(p);
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<void*, size_t>> free_;
  std::unordered_map<void*, size_t> size_;
  size_t kept_ = 0;
};

struct Step {
  Kind kind;
  float v;
};

// One shard's buffers (uninitialized: every element is written before it is read).
struct Scratch {
  std::unique_ptr<float[]> image;  // n * c: the values at a contrast barrier
  std::unique_ptr<float[]> tree;   // c * TreeHalf(n): the float means' tree
  std::unique_ptr<float[]> block;  // kBlock * c: a block when the chain has no barrier
  std::unique_ptr<float[]> mean;   // kBlock * c: the contrast means, per element of a block
  std::unique_ptr<int32_t[]> acc;  // kBlock * c: the levels sums, per element of a block
  std::unique_ptr<float[]> zeros;  // kBlock * c zeros: the tree's padding
  std::unique_ptr<float[]> block2;  // kBlock * c: the table path's second tree block
  std::vector<float> table;         // c * 256: the table path's chain so far, [c][256]
  std::vector<uint8_t> table8;      // c * 256: its uint8 levels output
  std::vector<int64_t> hist;        // c * 256: the image's level counts (levels means)
  std::vector<float> tmean;         // c * 256: a contrast's means laid out as the table
  std::vector<Step> steps;
  std::vector<float> m;
  std::vector<int64_t> sums;
  std::vector<int> level;  // FoldTree's stack: the tree level of each partial sum
};

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
    has_contrast_ = std::find(kinds_.begin(), kinds_.end(), Kind::kContrast) != kinds_.end();
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
    const bool float_out = normalize_ || to_float_;
    const char* alloc_env = std::getenv("TFPIPE_PIXEL_ALLOC");  // EXPERIMENT
    if (float_out && images.NumElements() * sizeof(float) >= PixelOutBuffers::kMin &&
        (alloc_env == nullptr || std::string(alloc_env) != "tf")) {
      ctx->set_output(0, Tensor(PixelOutBuffers::Get(), DT_FLOAT, images.shape()));
      out = ctx->mutable_output(0);
    } else {
      OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    }
    const int64_t n = h * w;
    if (b == 0 || n == 0 || c == 0) return;

    // normalize: x * (1 / (scale * std)) - mean / std, as color.normalize computes
    // its constants (float32, scale = 255 for uint8 levels, 1 for [0,1] floats),
    // laid out per element of a block (element e is channel e % c)
    const int64_t block = kBlock * c;
    std::vector<float> na, nb;
    if (normalize_) {
      const float scale = to_float_ ? 1.0f : 255.0f;
      na.resize(block);
      nb.resize(block);
      for (int64_t e = 0; e < block; ++e) {
        const int64_t k = e % c;
        const float m = mean_[mean_.size() == 1 ? 0 : k], s = std_[std_.size() == 1 ? 0 : k];
        na[e] = 1.0f / (scale * s);
        nb[e] = m / s;
      }
    }
    Io io;
    io.n = n;
    io.c = c;
    io.prm = params.flat<float>().data();
    io.app = apply.flat<bool>().data();
    io.in8 = float_in_ ? nullptr : images.flat<uint8_t>().data();
    io.inf = float_in_ ? images.flat<float>().data() : nullptr;
    io.outf = float_out ? out->flat<float>().data() : nullptr;
    io.out8 = float_out ? nullptr : out->flat<uint8_t>().data();
    io.na = na.data();
    io.nb = nb.data();
    const char* path = std::getenv("TFPIPE_PIXEL_PATH");
    io.table = path == nullptr || std::string(path) != "direct";

    auto run = [&](int64_t start, int64_t limit) {
      Scratch s;
      if (has_contrast_) {
        s.image.reset(new float[n * c]);
        if (to_float_) {
          // TreeSums' array, or FoldTree's stack (one block per level, + 1)
          int64_t levels = 2;
          while ((int64_t{1} << levels) < n) ++levels;
          s.tree.reset(new float[std::max<int64_t>(c * TreeHalf(n), block * (levels + 1))]);
          s.zeros.reset(new float[block]());
          s.level.resize(levels + 1);
        }
      }
      s.block.reset(new float[block]);
      s.block2.reset(new float[block]);
      if (!s.zeros) s.zeros.reset(new float[block]());
      s.table.resize(c * 256);
      s.table8.resize(c * 256);
      s.hist.resize(c * 256);
      s.tmean.resize(c * 256);
      s.mean.reset(new float[block]);
      s.acc.reset(new int32_t[block]);
      s.steps.reserve(kinds_.size());
      s.m.resize(c);
      s.sums.resize(c);
      for (int64_t img = start; img < limit; ++img) Image(img, io, s);
#if defined(__SSE2__)
      _mm_sfence();  // the streaming stores are visible before the shard reports done
#endif
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const int64_t cost = n * c * (4 + 4 * n_ops);  // rough cycles per image
    Shard(workers->num_threads, workers->workers, b, cost, run);
  }

 private:
  struct Io {
    int64_t n, c;
    const float* prm;
    const bool* app;
    const uint8_t* in8;
    const float* inf;
    float* outf;
    uint8_t* out8;
    const float* na;
    const float* nb;
    bool table;  // the table path may run (TFPIPE_PIXEL_PATH=direct: never)
  };

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
  void Store(const Io& io, const float* x, int64_t at, int64_t len) const {
    if (normalize_) {
      StoreNorm(x, len, io.na, io.nb, io.outf + at);
    } else if (to_float_) {
      std::memcpy(io.outf + at, x, len * sizeof(float));
    } else {
      StoreU8(x, len, io.out8 + at);
    }
  }

  // The table path: uint8 input and every contrast before the first saturation
  // (else false: the direct path runs). Up to the first saturation the chain is
  // per channel, and each op's result is a function of the element's previous value
  // and of per-image constants (the op's parameter, its channel's mean): so the value
  // after any of those ops is a function of the input level and the channel alone.
  // It is computed once per (channel, level) by the direct path's own functions
  // (Brightness, Contrast, Out: elementwise, the same IEEE operations in the same
  // order, no FMA) on a [c][256] array, and every element reads it back: the same
  // bits as computing each element. The contrast means are the direct path's too:
  // levels, the exact integer sum of the table's values over the image (from the
  // image's level counts); floats, FoldTree/TreeSums over the same values, gathered
  // from the table block by block, in the same order. With no saturation left, the
  // output step (normalize, or the uint8 store) is folded into the table as well,
  // so the image is read twice (counts or the tree, then the gather) and written once.
  bool TablePath(const Io& io, Scratch& s, int64_t base, float k) const {
    const size_t n_steps = s.steps.size();
    size_t t = 0;
    while (t < n_steps && s.steps[t].kind != Kind::kSaturation) ++t;
    for (size_t j = t; j < n_steps; ++j) {
      if (s.steps[j].kind == Kind::kContrast) return false;
    }
    const int64_t n = io.n, c = io.c, lt = c * 256, block = kBlock * c;
    const bool levels = !to_float_;
    const uint8_t* src = io.in8 + base;
    float* tab = s.table.data();
    // the load: float(level) * k, as LoadU8 (k = 1 for levels: exact)
    for (int64_t e = 0; e < lt; ++e) tab[e] = static_cast<float>(e & 255) * k;
    bool counted = false;
    for (size_t j = 0; j < t; ++j) {
      const Step& st = s.steps[j];
      if (st.kind == Kind::kBrightness) {
        if (levels) {
          Brightness<true>(tab, lt, st.v * 255.0f);
        } else {
          Brightness<false>(tab, lt, st.v);
        }
        continue;
      }
      // contrast: the channel means of the values so far, as the direct path's pass
      if (levels) {
        if (!counted) {
          std::fill(s.hist.begin(), s.hist.end(), 0);
          int64_t* hs = s.hist.data();
          if (c == 3) {
            for (int64_t i = 0; i < n; ++i) {
              ++hs[src[3 * i]];
              ++hs[256 + src[3 * i + 1]];
              ++hs[512 + src[3 * i + 2]];
            }
          } else {
            for (int64_t e = 0; e < n * c; ++e) ++hs[(e % c) * 256 + src[e]];
          }
          counted = true;
        }
        for (int64_t ch = 0; ch < c; ++ch) {
          int64_t sum = 0;
          for (int v = 0; v < 256; ++v) {
            sum += s.hist[ch * 256 + v] * static_cast<int64_t>(static_cast<int32_t>(tab[ch * 256 + v]));
          }
          s.m[ch] = static_cast<float>(static_cast<double>(sum) * (1.0 / static_cast<double>(n)));
        }
      } else {
        auto gather = [&](float* buf) {
          return [&, buf](int64_t kb) -> const float* {
            Gather<float>(src + kb * block, std::min(kBlock, n - kb * kBlock), c, tab, buf);
            return buf;
          };
        };
        if (TreeHalf(n) >= kBlock) {
          FoldTreeFrom(n, c, s, gather(s.block.get()), gather(s.block2.get()));
        } else {
          Gather<float>(src, n, c, tab, s.image.get());
          TreeSums(s.image.get(), n, c, s.tree.get(), s.m.data());
        }
        for (int64_t ch = 0; ch < c; ++ch) s.m[ch] = s.m[ch] * (1.0f / static_cast<float>(n));
      }
      float* mt = s.tmean.data();
      for (int64_t e = 0; e < lt; ++e) mt[e] = s.m[e / 256];
      if (levels) {
        Contrast<true>(tab, lt, mt, st.v);
      } else {
        Contrast<false>(tab, lt, mt, st.v);
      }
    }
    if (t < n_steps) {  // saturation (and what follows) on the gathered blocks
      for (int64_t e0 = 0; e0 < n * c; e0 += block) {
        const int64_t px = std::min(kBlock, n - e0 / c), len = px * c;
        Gather<float>(src + e0, px, c, tab, s.block.get());
        Ops(s, t, n_steps, s.block.get(), px, c);
        Store(io, s.block.get(), base + e0, len);
      }
      return true;
    }
    if (!normalize_ && levels) {  // uint8 out: the levels are exact integers
      for (int64_t e = 0; e < lt; ++e) {
        s.table8[e] = static_cast<uint8_t>(static_cast<int32_t>(tab[e]));
      }
      Gather<uint8_t>(src, n, c, s.table8.data(), io.out8 + base);
      return true;
    }
    if (normalize_) {  // StoreNorm's x * a - b; io.na[ch] is channel ch's constant
      for (int64_t e = 0; e < lt; ++e) tab[e] = tab[e] * io.na[e / 256] - io.nb[e / 256];
    }
    for (int64_t e0 = 0; e0 < n * c; e0 += block) {
      const int64_t px = std::min(kBlock, n - e0 / c), len = px * c;
      Gather<float>(src + e0, px, c, tab, s.block.get());
      StreamCopy(s.block.get(), len, io.outf + base + e0);
    }
    return true;
  }

  // One image, by one thread, in a fixed order. The passes: load + the ops before the
  // first contrast; at each contrast (the one barrier: its channel means need every
  // pixel) the means of the whole image, then that contrast + the ops up to the next
  // one; the last pass also stores the output. Each pass goes block by block; per
  // element the operations are the twin's, in its order.
  void Image(int64_t img, const Io& io, Scratch& s) const {
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
    if (io.in8 != nullptr && io.table && TablePath(io, s, base, k)) return;
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
    // One pass: steps [from, to) on every block of pixels, after the load (j < 0) or
    // after contrast j; the last pass stores the output, any other ends at a contrast,
    // whose channel means it leaves in s.m.
    auto pass = [&](int64_t j, size_t from, size_t to) {
      const bool last = to == n_steps;
      auto run = [&](int64_t i0) {  // the block of pixels [i0, i0 + kBlock)
        const int64_t px = std::min(kBlock, n - i0), e0 = i0 * c, len = px * c;
        float* x = barrier ? s.image.get() + e0 : s.block.get();
        if (j < 0 && io.inf != nullptr) {
          std::memcpy(x, io.inf + base + e0, len * sizeof(float));
        } else if (j < 0) {
          LoadU8(io.in8 + base + e0, len, k, x);
        } else if (levels) {
          Contrast<true>(x, len, s.mean.get(), s.steps[j].v);
        } else {
          Contrast<false>(x, len, s.mean.get(), s.steps[j].v);
        }
        Ops(s, from, to, x, px, c);
        if (last) {
          Store(io, x, base + e0, len);
        } else if (levels) {
          AccInt(x, len, s.acc.get());
        }
      };
      if (!last && levels) std::fill(s.acc.get(), s.acc.get() + block, 0);
      for (int64_t i0 = 0; i0 < n; i0 += kBlock) run(i0);
      if (last) return;
      if (levels) {  // exact integer sums
        std::fill(s.sums.begin(), s.sums.end(), 0);
        for (int64_t e = 0; e < std::min(block, n * c); ++e) s.sums[e % c] += s.acc[e];
      } else if (TreeHalf(n) >= kBlock) {
        FoldTree(n, c, s);
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

  // TreeSums of s.image into s.m with the same additions, in L1-sized pieces: with p = 2 * TreeHalf(n) padded pixels in nb = p / kBlock
  // blocks, the tree's levels down to h = kBlock add whole blocks (block k + block
  // k + h / kBlock, lane by lane), a halving tree over blocks. Computed depth first
  // (blocks in bit-reversed order, a stack of partial sums: each add has the operands
  // the level-by-level order gives it, lower index on the left), then the levels inside
  // the last block. Block k < nb / 2 is all pixels (k * kBlock < p / 2 < n); its partner
  // k + nb / 2 may be partly or wholly padding, the zeros added as TreeSums adds them.
  void FoldTree(int64_t n, int64_t c, Scratch& s) const {
    const int64_t block = kBlock * c;
    FoldTreeFrom(n, c, s, [&](int64_t k) -> const float* { return s.image.get() + k * block; },
                 [&](int64_t k) -> const float* { return s.image.get() + k * block; });
  }

  // FoldTree over blocks from src(k) (block k < nb / 2, whole) and src2(k) (its
  // partner, maybe partial): the image in L2, or the table path's gathers.
  template <class Src, class Src2>
  void FoldTreeFrom(int64_t n, int64_t c, Scratch& s, Src src, Src2 src2) const {
    const int64_t block = kBlock * c, nb = 2 * TreeHalf(n) / kBlock;
    int bits = 0;
    while ((int64_t{1} << bits) < nb) ++bits;
    int depth = 0;
    auto slot = [&](int d) { return s.tree.get() + d * block; };
    for (int64_t t = 0; t < nb; t += 2) {
      int64_t k = 0;  // bit reversal of t
      for (int b = 0; b < bits; ++b) k |= ((t >> b) & 1) << (bits - 1 - b);
      const float* x = src(k);
      const int64_t k2 = k + nb / 2;
      float* top = slot(depth);
      int64_t real = 0;  // elements of block k2 that are pixels
      if (k2 * kBlock < n) {
        const float* x2 = src2(k2);
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
  bool to_float_ = true, normalize_ = false, float_in_ = false, has_contrast_ = false;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipePixelChain").Device(DEVICE_CPU), PixelChainOp);
