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
// no float intermediate image or separate round/cast pass; on x86-64 a
// pixel's channels are one 4-lane op along x and the y lerp + round + saturate
// run 8 (AVX2) or 4 (SSE2) lanes wide (see "Hot loops" below).
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

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>  // SSE2 everywhere; the AVX2 ones only in target("avx2") functions
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"

#include "common.h"  // Philox seeding, uint8 rounding (shared with the other kernels)

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeResizeBilinearU8")
    .Input("image: uint8")
    .Input("size: int32")
    .Input("flip: bool")
    .Output("resized: uint8")
    .Attr("isa: {'native', 'baseline'} = 'native'")
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
isa: 'baseline' runs the loops a pre-AVX2 host runs (same bits; for tests).
)doc");

namespace {

// Which loops the SIMD kernels run: the widest this CPU has, or -- with a kernel's
// `isa: 'baseline'` attr (tfpipe.native.baseline_isa(): the host-independence tests
// and benchmarks) -- the baseline ones a pre-AVX host runs. C++ reads no environment
// variable: the choice travels as that attr. A kernel sets it for the work it runs,
// on its own thread and inside each of its Shard tasks (IsaScope); every loop that
// dispatches (UseAvx2 here, PixAvx in pixel.cc: one translation unit) reads it.
thread_local bool tfpipe_isa_baseline = false;

class IsaScope {
 public:
  explicit IsaScope(bool baseline) : saved_(tfpipe_isa_baseline) {
    tfpipe_isa_baseline = baseline;
  }
  ~IsaScope() { tfpipe_isa_baseline = saved_; }
  IsaScope(const IsaScope&) = delete;
  IsaScope& operator=(const IsaScope&) = delete;

 private:
  bool saved_;
};

// The kernel's `isa` attr: true for 'baseline'.
bool IsaBaselineAttr(OpKernelConstruction* ctx) {
  std::string isa = "native";
  if (ctx->HasAttr("isa")) {
    const absl::Status st = ctx->GetAttr("isa", &isa);
    if (!st.ok()) {
      ctx->CtxFailure(__FILE__, __LINE__, st);
      return false;
    }
  }
  return isa == "baseline";
}

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

// The x taps of one call: element offsets of each output column's left/right
// source pixel in a row, its weight `t`, and for the 4-lane loops `t4`: the
// weight repeated four times per column (one load per pixel), 0 where TF's
// right tap is clamped onto the left one (see ResizeBilinearU8Into).
struct XTaps {
  const int64_t* l;
  const int64_t* r;
  const float* t;
  const float* t4;
  int64_t out_w;
  int64_t row_in;  // in_w * channels
  int64_t channels;
};

// Floats of slack after the widened source row and after each x-interpolated
// row: the 3-channel SIMD loops read and write one lane past a pixel (the next
// pixel's first channel, or the slack), which the next pixel then overwrites.
constexpr int64_t kPad = 4;

// Hot loops exist as an AVX2 and a baseline x86-64 (SSE2) version, picked
// once per process (UseAvx2), so the .so runs on any CPU the TF wheel runs
// on; other CPUs get the portable scalar loops. Every version performs the
// same IEEE single operations in the same order -- per element
// l + (r - l) * t along x, then top + (bot - top) * t along y, no FMA
// (-ffp-contract=off, no "fma" target), lanes never combined -- so they give
// the same bits (the float rounding stays TF's); SIMD only changes how many
// elements one instruction handles. The one operand that differs is exact:
// at a clamped x tap the 4-lane loops compute l + (r' - l) * 0 (= l) where TF
// computes l + (l - l) * t (= l). The `isa: 'baseline'` attr (IsaScope) forces
// the baseline version: what a pre-AVX2 host runs
// (tests/pipeline/test_host_independence.py, tests/native/test_resize_simd.py).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(TFPIPE_NATIVE_PORTABLE)
#define TFPIPE_DISPATCH 1
#define TFPIPE_AVX2 __attribute__((target("avx2")))
#endif
#define TFPIPE_BODY inline __attribute__((always_inline))

// Widen one source row to float (the compiler vectorizes it): cheaper than
// converting both taps of every output value.
TFPIPE_BODY void Widen(const uint8_t* __restrict src, int64_t n, float* __restrict tmp) {
  for (int64_t i = 0; i < n; ++i) tmp[i] = static_cast<float>(src[i]);
}

// One widened source row interpolated along x: dst[x*C + k], TF's `top`/`bottom`.
template <int C>
TFPIPE_BODY void LerpXScalar(const float* __restrict tmp, const XTaps& xs,
                             float* __restrict dst) {
  const int64_t ch = C > 0 ? C : xs.channels;
  const int64_t* __restrict lo = xs.l;
  const int64_t* __restrict hi = xs.r;
  const float* __restrict tw = xs.t;
  const int64_t n = xs.out_w;
  for (int64_t x = 0; x < n; ++x) {
    const float* l = tmp + lo[x];
    const float* r = tmp + hi[x];
    const float t = tw[x];
    float* d = dst + x * ch;
    for (int64_t k = 0; k < ch; ++k) d[k] = l[k] + (r[k] - l[k]) * t;
  }
}

// Lerp along y and round/saturate: TF's `top + (bottom - top) * y_lerp`, rounded
// half to even (= tf.round) and saturated (common.h; the values are in [0, 255]: a
// lerp of two values in [0, 255] with t in [0, 1) stays between them). The SIMD
// loops' cvtps2dq + saturating packs give the same bytes on that range.
TFPIPE_BODY void LerpYScalar(const float* __restrict top, const float* __restrict bot, float t,
                             int64_t begin, int64_t n, uint8_t* __restrict out) {
  for (int64_t i = begin; i < n; ++i) {
    out[i] = tfpipe_common::RoundSaturateU8(top[i] + (bot[i] - top[i]) * t);
  }
}

#ifdef TFPIPE_DISPATCH
// 3 or 4 channels, one pixel per 4-lane op: lanes = the pixel's channels (and
// for C = 3 one lane of the next pixel, stored and then overwritten).
template <int C>
TFPIPE_BODY void LerpX4(const float* __restrict tmp, const XTaps& xs, int64_t x,
                        float* __restrict dst) {
  // locals: dst must not make the compiler reload the taps every pixel
  const int64_t* __restrict lo = xs.l;
  const float* __restrict t4 = xs.t4;
  const int64_t n = xs.out_w;
#pragma GCC unroll 4
  for (; x < n; ++x) {
    const float* p = tmp + lo[x];
    const __m128 l = _mm_loadu_ps(p);
    const __m128 r = _mm_loadu_ps(p + C);
    const __m128 t = _mm_loadu_ps(t4 + 4 * x);
    _mm_storeu_ps(dst + x * C, _mm_add_ps(l, _mm_mul_ps(_mm_sub_ps(r, l), t)));
  }
}

template <int C>
void RowXBase(const uint8_t* src, const XTaps& xs, float* tmp, float* dst) {
  Widen(src, xs.row_in, tmp);
  if constexpr (C == 3 || C == 4) {
    LerpX4<C>(tmp, xs, 0, dst);
  } else {
    LerpXScalar<C>(tmp, xs, dst);
  }
}

template <int C>
TFPIPE_AVX2 void RowXAvx2(const uint8_t* src, const XTaps& xs, float* tmp, float* dst) {
  Widen(src, xs.row_in, tmp);
  if constexpr (C == 3 || C == 4) {
    LerpX4<C>(tmp, xs, 0, dst);
  } else {
    LerpXScalar<C>(tmp, xs, dst);
  }
}

// Four lanes of the y lerp, rounded half to even (cvtps2dq in the default
// rounding mode) to int32.
TFPIPE_BODY __m128i LerpY4(const float* top, const float* bot, __m128 t, int64_t i) {
  const __m128 a = _mm_loadu_ps(top + i), b = _mm_loadu_ps(bot + i);
  return _mm_cvtps_epi32(_mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), t)));
}

void RowYBase(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
  const __m128 tv = _mm_set1_ps(t);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {  // saturating packs: int32 -> int16 -> uint8
    const __m128i lo = _mm_packs_epi32(LerpY4(top, bot, tv, i), LerpY4(top, bot, tv, i + 4));
    const __m128i hi = _mm_packs_epi32(LerpY4(top, bot, tv, i + 8), LerpY4(top, bot, tv, i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(lo, hi));
  }
  LerpYScalar(top, bot, t, i, n, out);
}

TFPIPE_AVX2 void RowYAvx2(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
  const __m256 tv = _mm256_set1_ps(t);
  auto lerp8 = [&](int64_t i) TFPIPE_AVX2 {
    const __m256 a = _mm256_loadu_ps(top + i), b = _mm256_loadu_ps(bot + i);
    return _mm256_cvtps_epi32(_mm256_add_ps(a, _mm256_mul_ps(_mm256_sub_ps(b, a), tv)));
  };
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // packs work within 128-bit lanes: dwords come out as a0-3 b0-3 c0-3 d0-3 |
    // a4-7 b4-7 c4-7 d4-7; the permute puts them back in order.
    const __m256i ab = _mm256_packs_epi32(lerp8(i), lerp8(i + 8));
    const __m256i cd = _mm256_packs_epi32(lerp8(i + 16), lerp8(i + 24));
    const __m256i v = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd),
                                                  _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
  }
  const __m128 t4 = _mm_set1_ps(t);
  for (; i + 16 <= n; i += 16) {
    const __m128i lo = _mm_packs_epi32(LerpY4(top, bot, t4, i), LerpY4(top, bot, t4, i + 4));
    const __m128i hi = _mm_packs_epi32(LerpY4(top, bot, t4, i + 8), LerpY4(top, bot, t4, i + 12));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm_packus_epi16(lo, hi));
  }
  LerpYScalar(top, bot, t, i, n, out);
}

bool UseAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has && !tfpipe_isa_baseline;
}
#else
template <int C>
void RowXPortable(const uint8_t* src, const XTaps& xs, float* tmp, float* dst) {
  Widen(src, xs.row_in, tmp);
  LerpXScalar<C>(tmp, xs, dst);
}
void RowYPortable(const float* top, const float* bot, float t, int64_t n, uint8_t* out) {
  LerpYScalar(top, bot, t, 0, n, out);
}
#endif

using RowXFn = void (*)(const uint8_t*, const XTaps&, float*, float*);
using RowYFn = void (*)(const float*, const float*, float, int64_t, uint8_t*);

template <int C>
RowXFn PickRowX() {
#ifdef TFPIPE_DISPATCH
  return UseAvx2() ? &RowXAvx2<C> : &RowXBase<C>;
#else
  return &RowXPortable<C>;
#endif
}

// uint8 [in_h, in_w, channels] -> uint8 [out_h, out_w, channels] (dst), the
// TfpipeResizeBilinearU8 definition (header comment); flip mirrors the output
// columns. Also window_decode.cc's resize (one translation unit, see build.py).
// src_stride: elements from one source row to the next (0: in_w * channels),
// so the source may be a column range of a wider image (window_decode.cc reads
// its window out of the iMCU-aligned decode).
void ResizeBilinearU8Into(const uint8_t* src, int64_t in_h, int64_t in_w, int64_t channels,
                          int64_t out_h, int64_t out_w, bool flip, uint8_t* dst,
                          int64_t src_stride = 0) {
  std::vector<Interp> xw, ys;
  Weights(out_w, in_w, &xw);
  Weights(out_h, in_h, &ys);
  if (flip) std::reverse(xw.begin(), xw.end());  // output column x <- source of W-1-x
  const int64_t row_in = in_w * channels, row_out = out_w * channels;
  const int64_t src_row = src_stride > 0 ? src_stride : row_in;

  // One allocation per call: the taps, the widened source row and two cached
  // x-interpolated rows (each with kPad floats of slack, zeroed so the spare
  // lanes compute on numbers).
  std::vector<int64_t> offs(2 * out_w);
  for (int64_t x = 0; x < out_w; ++x) {
    offs[x] = xw[x].lower * channels;
    offs[out_w + x] = xw[x].upper * channels;
  }
  const int64_t t4_at = 0, t_at = 4 * out_w, wide_at = t_at + ((out_w + 7) & ~int64_t{7});
  const int64_t rows_at = wide_at + row_in + kPad, row_stride = row_out + kPad;
  std::vector<float> scratch(rows_at + 2 * row_stride, 0.0f);
  float* f = scratch.data();
  for (int64_t x = 0; x < out_w; ++x) {
    f[t_at + x] = xw[x].lerp;
    // LerpX4 reads the right pixel at left + channels (one address for both
    // loads). Weights() gives upper == lower + 1, or upper == lower where TF
    // clamps at the image edge (or `in` is integral); there the weight is 0
    // instead: l + (r' - l) * 0 == l == l + (l - l) * t exactly for a finite
    // r' (the next pixel, or the zeroed slack), so the bytes do not change.
    const float t4 = xw[x].upper == xw[x].lower ? 0.0f : xw[x].lerp;
    for (int k = 0; k < 4; ++k) f[t4_at + 4 * x + k] = t4;
  }
  const XTaps taps{offs.data(), offs.data() + out_w, f + t_at, f + t4_at, out_w, row_in,
                   channels};
  float* wide = f + wide_at;
  float* rows[2] = {f + rows_at, f + rows_at + row_stride};
  int64_t have[2] = {-1, -1};  // source row held in rows[i]

  RowXFn row_x;
  switch (channels) {
    case 1: row_x = PickRowX<1>(); break;
    case 3: row_x = PickRowX<3>(); break;
    case 4: row_x = PickRowX<4>(); break;
    default: row_x = PickRowX<0>();
  }
#ifdef TFPIPE_DISPATCH
  const RowYFn row_y = UseAvx2() ? &RowYAvx2 : &RowYBase;
#else
  const RowYFn row_y = &RowYPortable;
#endif
  auto fetch = [&](int64_t y, int64_t other) -> const float* {
    // The x-interpolated source row y; on a miss, computed into the slot
    // that does not hold `other` (the second row this output row needs).
    if (have[0] == y) return rows[0];
    if (have[1] == y) return rows[1];
    const int slot = have[0] == other ? 1 : 0;
    row_x(src + y * src_row, taps, wide, rows[slot]);
    have[slot] = y;
    return rows[slot];
  };
  for (int64_t y = 0; y < out_h; ++y) {
    const Interp& iy = ys[y];
    const float* top = fetch(iy.lower, iy.upper);
    const float* bot = fetch(iy.upper, iy.lower);
    row_y(top, bot, iy.lerp, row_out, dst + y * row_out);
  }
}

class ResizeBilinearU8Op : public OpKernel {
 public:
  explicit ResizeBilinearU8Op(OpKernelConstruction* ctx)
      : OpKernel(ctx), baseline_(IsaBaselineAttr(ctx)) {}

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

    IsaScope isa(baseline_);
    ResizeBilinearU8Into(image.flat<uint8>().data(), in_h, in_w, channels, out_h, out_w, flip,
                         out->flat<uint8>().data());
  }

 private:
  const bool baseline_;
};

}  // namespace

REGISTER_KERNEL_BUILDER(Name("TfpipeResizeBilinearU8").Device(DEVICE_CPU),
                        ResizeBilinearU8Op);
