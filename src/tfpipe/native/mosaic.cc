// TfpipeMosaic: the 2x2 mosaic of tfpipe.augment.detection.mosaic in one pass.
//
// Output pixel (b, y, x) lies in quadrant q = 2 * (y >= cy[b]) + (x >= cx[b]) and
// is the bilinear sample of image partners[q][b] at the separable taps given
// by the caller (computed once per row / column in TF, shared with the pure-TF
// twin `detection._mosaic_tf`):
//   rows y0[b, y], y0 + 1 with weights 256 - wy[b, y], wy[b, y]   (wy in 0..256)
//   cols x0[b, x], x0 + 1 with weights 256 - wx[b, x], wx[b, x]
// A tap outside the source image reads fill_value. With h_r = wx0 * p(r, x0) +
// wx1 * p(r, x0 + 1):
//   uint8:   out = (wy0 * h_y0 + wy1 * h_y1 + 32768) >> 16   (exact integers)
//   float32: out = (wy0 * h_y0 + wy1 * h_y1) * 2^-16   (this order, IEEE, no FMA)
// For uint8 every intermediate is an integer below 2^24 (255 * 256 * 256 + 32768),
// so the SSE2 float lanes below compute it exactly: the result cannot depend on
// the host. For float32 the operations are the twin's, in the twin's order,
// one IEEE multiply or add each (build.py: -ffp-contract=off).
// Rows of samples with apply[b] false are copied unchanged.
//
// Why a kernel: each output pixel is resampled once (the old definition warped
// all four partners over the whole canvas and kept a quadrant of each), reads
// uint8 directly and needs no index tensors. Output rows are sharded over the
// CPU worker pool; every pixel is independent, so the thread count does not
// change the result.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

#include "common.h"  // Philox seeding, uint8 rounding (shared with the other kernels)

REGISTER_OP("TfpipeMosaic")
    .Input("images: dtype")
    .Input("partners: int32")
    .Input("centers: int32")
    .Input("x0: int32")
    .Input("wx: int32")
    .Input("y0: int32")
    .Input("wy: int32")
    .Input("apply: bool")
    .Input("fill_value: float")
    .Attr("dtype: {uint8, float}")
    .Output("mosaic: dtype")
    .SetShapeFn([](::tensorflow::shape_inference::InferenceContext* c) {
      ::tensorflow::shape_inference::ShapeHandle images;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
      c->set_output(0, images);
      return absl::OkStatus();
    })
    .Doc(R"doc(
2x2 mosaic with separable bilinear taps per quadrant (tfpipe.augment.mosaic).
)doc");

namespace tfpipe_mosaic {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;
namespace errors = ::tensorflow::errors;

template <typename T>
inline T Fill(float v);
template <>
inline float Fill<float>(float v) { return v; }
template <>
inline uint8_t Fill<uint8_t>(float v) {
  return tfpipe_common::RoundSaturateU8(v);  // tf.saturate_cast(tf.round(v), uint8)
}

// One channel value from four taps: the documented formula.
inline uint8_t Mix(int32_t p00, int32_t p01, int32_t p10, int32_t p11, int32_t wx0,
                   int32_t wx1, int32_t wy0, int32_t wy1) {
  const int32_t h0 = wx0 * p00 + wx1 * p01;
  const int32_t h1 = wx0 * p10 + wx1 * p11;
  return static_cast<uint8_t>((wy0 * h0 + wy1 * h1 + 32768) >> 16);
}
inline float Mix(float p00, float p01, float p10, float p11, float wx0, float wx1, float wy0,
                 float wy1) {
  const float h0 = wx0 * p00 + wx1 * p01;
  const float h1 = wx0 * p10 + wx1 * p11;
  return (wy0 * h0 + wy1 * h1) * (1.0f / 65536.0f);
}

template <typename T>
struct Acc;
template <>
struct Acc<uint8_t> { using type = int32_t; };
template <>
struct Acc<float> { using type = float; };

#if defined(__SSE2__)
inline __m128 Load3(const uint8_t* p) {
  const uint32_t u = p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16);
  const __m128i zero = _mm_setzero_si128();
  const __m128i i = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(u)), zero);
  return _mm_cvtepi32_ps(_mm_unpacklo_epi16(i, zero));
}
inline __m128 Load3(const float* p) {
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  std::memcpy(v, p, 3 * sizeof(float));
  return _mm_loadu_ps(v);
}
// Pixels p[0..2] and p[3..5] from one 8-byte load (p + 8 inside the buffer).
inline void Load3x2(const uint8_t* p, __m128* left, __m128* right) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  const __m128i w16 = _mm_unpacklo_epi8(v, zero);
  *left = _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16, zero));
  *right = _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_srli_si128(w16, 6), zero));
}
inline void Load3x2(const float* p, __m128* left, __m128* right) {  // p + 7 inside
  *left = _mm_loadu_ps(p);
  *right = _mm_loadu_ps(p + 3);
}
inline void Store3(uint8_t* out, __m128 acc) {
  // acc is an exact integer in [0, 255 * 65536]: + 32768, * 2^-16 and truncation
  // are exact too, so this is the integer formula's (acc + 32768) >> 16.
  const __m128 v = _mm_mul_ps(_mm_add_ps(acc, _mm_set1_ps(32768.0f)),
                              _mm_set1_ps(1.0f / 65536.0f));
  __m128i i = _mm_cvttps_epi32(v);
  i = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
  const uint32_t u = static_cast<uint32_t>(_mm_cvtsi128_si32(i));
  out[0] = static_cast<uint8_t>(u);
  out[1] = static_cast<uint8_t>(u >> 8);
  out[2] = static_cast<uint8_t>(u >> 16);
}
inline void Store3(float* out, __m128 acc) {
  float tmp[4];
  _mm_storeu_ps(tmp, _mm_mul_ps(acc, _mm_set1_ps(1.0f / 65536.0f)));
  std::memcpy(out, tmp, 3 * sizeof(float));
}
#endif

#if defined(__SSE2__)
// Scale 0.5 (every weight 128, the taps of consecutive output pixels two source
// pixels apart): the formula is exactly (a + b + c + d + 2) >> 2, since
// (128 * 128 * sum + 32768) >> 16 = floor((sum + 2) / 4). Two 3-channel output
// pixels from 16 bytes of each source row (12 used; r0 + 16, r1 + 16 inside).
inline void Half2(const uint8_t* r0, const uint8_t* r1, uint8_t* out) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r0));
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(r1));
  // u16 column sums: lo = bytes 0-7 (p0, p1, p2c0-1), hi = bytes 8-15 (p2c2, p3, ...)
  const __m128i lo = _mm_add_epi16(_mm_unpacklo_epi8(a, zero), _mm_unpacklo_epi8(b, zero));
  const __m128i hi = _mm_add_epi16(_mm_unpackhi_epi8(a, zero), _mm_unpackhi_epi8(b, zero));
  const __m128i o0 = _mm_add_epi16(lo, _mm_srli_si128(lo, 6));        // lanes 0-2: p0 + p1
  const __m128i d = _mm_or_si128(_mm_srli_si128(lo, 12), _mm_slli_si128(hi, 4));  // p2, p3
  const __m128i o1 = _mm_add_epi16(d, _mm_srli_si128(d, 6));          // lanes 0-2: p2 + p3
  const __m128i keep = _mm_setr_epi16(-1, -1, -1, 0, 0, 0, 0, 0);
  __m128i e = _mm_or_si128(_mm_and_si128(o0, keep), _mm_slli_si128(_mm_and_si128(o1, keep), 6));
  e = _mm_srli_epi16(_mm_add_epi16(e, _mm_set1_epi16(2)), 2);
  alignas(16) uint8_t tmp[16];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), _mm_packus_epi16(e, e));
  std::memcpy(out, tmp, 6);
}
#endif

struct Args {
  const void* in;
  const void* in_end;
  void* out;
  const int32_t* partners;  // [4, B]
  const int32_t* centers;   // [B, 2]: cx, cy
  const int32_t *x0, *wx;   // [B, W]
  const int32_t *y0, *wy;   // [B, H]
  const bool* apply;        // [B]
  int64_t b, h, w, c;
  float fill;
};

template <typename T, int kC>
void Row(const Args& a, int64_t b, int64_t y) {
  const int64_t h = a.h, w = a.w, c = kC ? kC : a.c, row = w * c;
  const T* in = static_cast<const T*>(a.in);
  T* out = static_cast<T*>(a.out) + (b * h + y) * row;
  if (!a.apply[b]) {
    std::memcpy(out, in + (b * h + y) * row, row * sizeof(T));
    return;
  }
  using A = typename Acc<T>::type;
  const T fill = Fill<T>(a.fill);
  const int64_t cx = std::min<int64_t>(std::max<int64_t>(a.centers[2 * b], 0), w);
  const bool top = y < a.centers[2 * b + 1];
  const int64_t y0 = a.y0[b * h + y];
  const A wy1 = static_cast<A>(a.wy[b * h + y]), wy0 = static_cast<A>(256) - wy1;
  const bool row0 = 0 <= y0 && y0 < h, row1 = 0 <= y0 + 1 && y0 + 1 < h;
  const int32_t* x0s = a.x0 + b * w;
  const int32_t* wxs = a.wx + b * w;
  [[maybe_unused]] const T* in_end = static_cast<const T*>(a.in_end);
  for (int half = 0; half < 2; ++half) {
    const int64_t x_begin = half == 0 ? 0 : cx, x_end = half == 0 ? cx : w;
    if (x_begin >= x_end) continue;
    const int64_t src = a.partners[(top ? 0 : 2 * a.b) + half * a.b + b];
    const T* img = in + src * h * row;
    const T* r0 = img + y0 * row;  // dereferenced only when row0 / row1
#if defined(__SSE2__)
    // the scale-0.5 pattern: both source rows inside, row weight 128 (pairs below)
    [[maybe_unused]] const bool halves = row0 && row1 && wy1 == 128;
#endif
    for (int64_t x = x_begin; x < x_end; ++x) {
#if defined(__SSE2__)
      if constexpr (std::is_same<T, uint8_t>::value && kC == 3) {
        if (halves) {  // pairs of interior pixels whose 16-byte reads stay inside
          while (x + 1 < x_end && wxs[x] == 128 && wxs[x + 1] == 128 &&
                 x0s[x + 1] == x0s[x] + 2 && x0s[x] >= 0 && x0s[x + 1] + 1 < w &&
                 r0 + row + x0s[x] * 3 + 16 <= in_end) {
            Half2(r0 + x0s[x] * 3, r0 + row + x0s[x] * 3, out + x * 3);
            x += 2;
          }
          if (x >= x_end) break;
        }
      }
#endif
      const int64_t x0 = x0s[x];
      const A wx1 = static_cast<A>(wxs[x]), wx0 = static_cast<A>(256) - wx1;
      T* o = out + x * c;
      if (row0 && row1 && 0 <= x0 && x0 + 1 < w) {  // interior: no checks per tap
        const T* p00 = r0 + x0 * c;
#if defined(__SSE2__)
        if (kC == 3) {
          const T* p10 = p00 + row;
          __m128 v00, v01, v10, v11;
          if (p10 + 8 <= in_end) {
            Load3x2(p00, &v00, &v01);
            Load3x2(p10, &v10, &v11);
          } else {
            v00 = Load3(p00), v01 = Load3(p00 + 3), v10 = Load3(p10), v11 = Load3(p10 + 3);
          }
          const __m128 fx0 = _mm_set1_ps(static_cast<float>(wx0));
          const __m128 fx1 = _mm_set1_ps(static_cast<float>(wx1));
          const __m128 h0 = _mm_add_ps(_mm_mul_ps(fx0, v00), _mm_mul_ps(fx1, v01));
          const __m128 h1 = _mm_add_ps(_mm_mul_ps(fx0, v10), _mm_mul_ps(fx1, v11));
          Store3(o, _mm_add_ps(_mm_mul_ps(_mm_set1_ps(static_cast<float>(wy0)), h0),
                               _mm_mul_ps(_mm_set1_ps(static_cast<float>(wy1)), h1)));
          continue;
        }
#endif
        for (int64_t k = 0; k < c; ++k) {
          o[k] = Mix(static_cast<A>(p00[k]), static_cast<A>(p00[c + k]),
                     static_cast<A>(p00[row + k]), static_cast<A>(p00[row + c + k]), wx0, wx1,
                     wy0, wy1);
        }
        continue;
      }
      // border: a tap outside the source reads the fill value
      const bool c0 = 0 <= x0 && x0 < w, c1 = 0 <= x0 + 1 && x0 + 1 < w;
      for (int64_t k = 0; k < c; ++k) {
        const A f = static_cast<A>(fill);
        const A v00 = row0 && c0 ? static_cast<A>(r0[x0 * c + k]) : f;
        const A v01 = row0 && c1 ? static_cast<A>(r0[(x0 + 1) * c + k]) : f;
        const A v10 = row1 && c0 ? static_cast<A>(r0[row + x0 * c + k]) : f;
        const A v11 = row1 && c1 ? static_cast<A>(r0[row + (x0 + 1) * c + k]) : f;
        o[k] = Mix(v00, v01, v10, v11, wx0, wx1, wy0, wy1);
      }
    }
  }
}

template <typename T>
class MosaicOp : public OpKernel {
 public:
  explicit MosaicOp(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    OP_REQUIRES(ctx, images.dims() == 4,
                errors::InvalidArgument("images must be [B, H, W, C], got ",
                                        images.shape().DebugString()));
    const int64_t b = images.dim_size(0), h = images.dim_size(1), w = images.dim_size(2);
    auto expect = [&](int i, std::initializer_list<int64_t> dims, const char* name) {
      const Tensor& t = ctx->input(i);
      bool ok = t.dims() == static_cast<int>(dims.size());
      int k = 0;
      for (int64_t d : dims) ok = ok && t.dim_size(k++) == d;
      if (!ok) {
        ctx->CtxFailure(errors::InvalidArgument(name, " has shape ", t.shape().DebugString(),
                                                ", does not match images ",
                                                images.shape().DebugString()));
      }
      return ok;
    };
    if (!expect(1, {4, b}, "partners [4, B]") || !expect(2, {b, 2}, "centers [B, 2]") ||
        !expect(3, {b, w}, "x0 [B, W]") || !expect(4, {b, w}, "wx [B, W]") ||
        !expect(5, {b, h}, "y0 [B, H]") || !expect(6, {b, h}, "wy [B, H]") ||
        !expect(7, {b}, "apply [B]") || !expect(8, {}, "fill_value []")) {
      return;
    }
    const auto partners = ctx->input(1).flat<int32_t>();
    for (int64_t i = 0; i < partners.size(); ++i) {
      OP_REQUIRES(ctx, 0 <= partners(i) && partners(i) < b,
                  errors::InvalidArgument("partners must be in [0, ", b, "), got ",
                                          partners(i)));
    }
    for (int in : {4, 6}) {  // weights
      const auto wt = ctx->input(in).flat<int32_t>();
      for (int64_t i = 0; i < wt.size(); ++i) {
        OP_REQUIRES(ctx, 0 <= wt(i) && wt(i) <= 256,
                    errors::InvalidArgument("weights must be in [0, 256], got ", wt(i)));
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, images.shape(), &out));
    if (out->NumElements() == 0) return;

    Args a;
    a.in = images.data();
    a.in_end = images.flat<T>().data() + images.NumElements();
    a.out = out->data();
    a.partners = partners.data();
    a.centers = ctx->input(2).flat<int32_t>().data();
    a.x0 = ctx->input(3).flat<int32_t>().data();
    a.wx = ctx->input(4).flat<int32_t>().data();
    a.y0 = ctx->input(5).flat<int32_t>().data();
    a.wy = ctx->input(6).flat<int32_t>().data();
    a.apply = ctx->input(7).flat<bool>().data();
    a.b = b, a.h = h, a.w = w, a.c = images.dim_size(3);
    a.fill = ctx->input(8).scalar<float>()();
    auto* fn = a.c == 3 ? &Row<T, 3> : a.c == 1 ? &Row<T, 1> : &Row<T, 0>;
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) fn(a, r / h, r % h);
    };
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    ::tensorflow::Shard(workers->num_threads, workers->workers, b * h, w * a.c * 8, run);
  }
};

// the registration macro needs the builder spelled `Name(`
using ::tensorflow::register_kernel::Name;
REGISTER_KERNEL_BUILDER(
    Name("TfpipeMosaic").Device(::tensorflow::DEVICE_CPU).TypeConstraint<uint8_t>("dtype"),
    MosaicOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("TfpipeMosaic").Device(::tensorflow::DEVICE_CPU).TypeConstraint<float>("dtype"),
    MosaicOp<float>);

}  // namespace tfpipe_mosaic
