// TfpipeAffineWarp: the nearest/bilinear warp of tfpipe.augment.geometry.affine,
// i.e. TF's ImageProjectiveTransformV3 (same [B or 1, 8] output->input
// transform vector, fill modes, fill value), with the same float32 arithmetic
// in the same order, so the result is bit-identical to the pure-TF path:
//   float32 images: ImageProjectiveTransformV3(image)
//   uint8 images:   saturate_cast<uint8>(round_half_even(
//                       ImageProjectiveTransformV3(float32(image))))
// Why it is faster: TF's kernel is an Eigen generator evaluated per OUTPUT
// ELEMENT, so it redoes the projection, the coordinate folding and the
// bounds checks once per channel, reads through a 4-D index, and (for uint8)
// needs a float32 copy in, a float32 image out and separate round/cast passes.
// Here each output pixel computes its source position and taps once, interior
// pixels skip the per-tap bounds checks, and uint8 is read and written
// directly; with SSE2 (every x86-64) the coordinates/weights of 4 pixels are
// computed per step and 3 channels are interpolated as one 4-lane vector, and
// the output is walked in tiles for cache locality. An axis-aligned transform
// (translation and/or scale: t1 == t3 == 0, not projective, detected per image
// from the values) takes WarpTileAxis instead: the column-only source x and
// row-only source y give taps, weights and bounds once per column and once per
// row (the same float expressions, so the same bits), then 4 grayscale pixels
// per SSE2 step with one load per source row for a translation. The projection is
// evaluated per pixel exactly as TF writes it ((t0*x + t1*y) + t2) rather than
// incrementally, so that coordinates -- and hence results -- match bit for
// bit. Build without FMA contraction (build.py: -ffp-contract=off).
//
// Threads: a batch is sharded over the CPU worker pool by output tiles; a
// single image (the tf.data map case: one image per call, many calls in
// parallel) runs inline. Every output pixel is independent, so the result
// does not depend on the thread count.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/shape_inference.h"
#include "tensorflow/core/util/work_sharder.h"

#include "common.h"  // Philox seeding, uint8 rounding (shared with the other kernels)

using namespace tensorflow;  // NOLINT(build/namespaces)

REGISTER_OP("TfpipeAffineWarp")
    .Input("images: dtype")
    .Input("transforms: float")
    .Input("output_shape: int32")
    .Input("fill_value: float")
    .Attr("dtype: {uint8, float}")
    .Attr("interpolation: {'NEAREST', 'BILINEAR'}")
    .Attr("fill_mode: {'CONSTANT', 'REFLECT', 'WRAP', 'NEAREST'} = 'CONSTANT'")
    .Output("transformed_images: dtype")
    .SetShapeFn([](shape_inference::InferenceContext* c) {
      shape_inference::ShapeHandle images, hw, out;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
      shape_inference::ShapeHandle transforms;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 2, &transforms));
      TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(2, &hw));
      TF_RETURN_IF_ERROR(c->WithRank(hw, 2, &hw));
      TF_RETURN_IF_ERROR(c->Concatenate(c->Vector(c->Dim(images, 0)), hw, &out));
      TF_RETURN_IF_ERROR(c->Concatenate(out, c->Vector(c->Dim(images, 3)), &out));
      c->set_output(0, out);
      return absl::OkStatus();
    })
    .Doc(R"doc(
ImageProjectiveTransformV3 for uint8 (rounded half to even, saturated) and
float32 images, bit-identical to the TF kernel on float32 input.
)doc");

namespace {

enum class Fill { kConstant, kReflect, kWrap, kNearest };

// TF's MapCoordinate<Device, Mode>, verbatim semantics (image_ops.h).
template <Fill F>
inline float MapCoord(float in, int64_t len) {
  if (F == Fill::kConstant) return in;
  if (F == Fill::kNearest) return std::min(std::max(in, 0.0f), static_cast<float>(len - 1));
  if (F == Fill::kReflect) {
    if (in < 0) {
      if (len <= 1) {
        in = 0;
      } else {
        const int64_t sz2 = 2 * len;
        if (in < sz2) in = sz2 * static_cast<int64_t>(-in / sz2) + in;
        in = (in < -len) ? in + sz2 : -in - 1;
      }
    } else if (in > len - 1) {
      if (len <= 1) {
        in = 0;
      } else {
        const int64_t sz2 = 2 * len;
        in -= sz2 * static_cast<int64_t>(in / sz2);
        if (in >= len) in = sz2 - in - 1;
      }
    }
  } else {  // wrap
    if (in < 0) {
      if (len <= 1) {
        in = 0;
      } else {
        const int64_t sz = len - 1;
        in += len * (static_cast<int64_t>(-in / sz) + 1);
      }
    } else if (in > len - 1) {
      if (len <= 1) {
        in = 0;
      } else {
        const int64_t sz = len - 1;
        in -= len * static_cast<int64_t>(in / sz);
      }
    }
  }
  // Eigen's scalar_clamp_op(0, len - 1): min(max(x, lo), hi).
  return std::min(std::max(in, 0.0f), static_cast<float>(len - 1));
}

template <typename T>
inline T FromFloat(float v);
template <>
inline float FromFloat<float>(float v) { return v; }
template <>
inline uint8_t FromFloat<uint8_t>(float v) {
  return tfpipe_common::RoundSaturateU8(v);  // tf.round then saturate_cast; NaN -> 0
}

// Coordinates far outside the image must not overflow the int conversion; any
// value beyond this is outside every image (kMaxSide bounds H and W).
constexpr float kFar = 1e9f;
inline int64_t ToIndex(float v) {
  return static_cast<int64_t>(std::min(std::max(v, -kFar), kFar));
}

// std::round (half away from zero) as an integer index; roundf is a libm call
// without SSE4.1. Exact: v - trunc(v) is representable for |v| < 2^23, and
// beyond kFar the index is outside every image either way.
inline int64_t RoundIndex(float v) {
  const float c = std::min(std::max(v, -kFar), kFar);
  const int64_t t = static_cast<int64_t>(c);          // truncates toward zero
  const float frac = c - static_cast<float>(t);
  return frac >= 0.5f ? t + 1 : frac <= -0.5f ? t - 1 : t;
}

#if defined(__SSE2__)
// 3-channel pixels as 4 float lanes (the 4th is 0 and never stored): the
// per-lane IEEE mul/add are the scalar ones, so results stay bit-identical.
inline __m128 Load3(const uint8_t* p) {
  const uint32_t u = p[0] | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16);
  const __m128i zero = _mm_setzero_si128();
  __m128i i = _mm_unpacklo_epi8(_mm_cvtsi32_si128(static_cast<int>(u)), zero);
  return _mm_cvtepi32_ps(_mm_unpacklo_epi16(i, zero));
}
inline __m128 Load3(const float* p) {
  float v[4] = {0.f, 0.f, 0.f, 0.f};
  std::memcpy(v, p, 3 * sizeof(float));
  return _mm_loadu_ps(v);
}
// Two horizontally adjacent 3-channel pixels p[0..2], p[3..5] from one 8-byte
// load (p + 8 must be inside the buffer): the taps (x0, y) and (x0 + 1, y).
inline void Load3x2(const uint8_t* p, __m128* left, __m128* right) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));  // 8 bytes
  const __m128i w16 = _mm_unpacklo_epi8(v, zero);                    // 8 x u16
  *left = _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16, zero));            // p[0..3]
  *right = _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_srli_si128(w16, 6), zero));  // p[3..6]
}
inline void Load3x2(const float* p, __m128* left, __m128* right) {  // p + 7 inside
  *left = _mm_loadu_ps(p);
  *right = _mm_loadu_ps(p + 3);
}

inline void Store3(uint8_t* out, __m128 v) {
  // FromFloat<uint8_t> on 4 lanes (NaN -> 0 as well)
  __m128i i = _mm_cvttps_epi32(tfpipe_common::RoundSaturate4(v));
  i = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
  const uint32_t u = static_cast<uint32_t>(_mm_cvtsi128_si32(i));
  out[0] = static_cast<uint8_t>(u);
  out[1] = static_cast<uint8_t>(u >> 8);
  out[2] = static_cast<uint8_t>(u >> 16);
}
inline void Store3(float* out, __m128 v) {
  float tmp[4];
  _mm_storeu_ps(tmp, v);
  std::memcpy(out, tmp, 3 * sizeof(float));
}
#endif

struct Args {
  const void* in;  // [B, H, W, C]
  const void* in_end;  // one past the last input element
  void* out;       // [B, oh, ow, C]
  const float* transforms;
  int64_t transform_stride;  // 0 when one transform serves the whole batch
  int64_t h, w, c, oh, ow;
  float fill;
};

#if defined(__SSE2__)
// The interior 3-channel bilinear pixel: TF's formula on 4 lanes.
template <typename T>
inline void Interp3(const T* p00, int64_t row, const T* in_end, float wx0, float wx1,
                    float wy0, float wy1, T* out) {
  const T* p10 = p00 + row;
  __m128 v00, v01, v10, v11;
  // Wide loads read up to 2 elements past the (x0+1) pixel: only when inside
  // the buffer (all but the last pixels of the batch); the extra lane is
  // computed and dropped.
  if (p10 + 8 <= in_end) {
    Load3x2(p00, &v00, &v01);
    Load3x2(p10, &v10, &v11);
  } else {
    v00 = Load3(p00), v01 = Load3(p00 + 3), v10 = Load3(p10), v11 = Load3(p10 + 3);
  }
  const __m128 vf = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(wx0), v00),
                               _mm_mul_ps(_mm_set1_ps(wx1), v01));
  const __m128 vc = _mm_add_ps(_mm_mul_ps(_mm_set1_ps(wx0), v10),
                               _mm_mul_ps(_mm_set1_ps(wx1), v11));
  Store3(out, _mm_add_ps(_mm_mul_ps(_mm_set1_ps(wy0), vf), _mm_mul_ps(_mm_set1_ps(wy1), vc)));
}

// Four interior 1-channel bilinear pixels: lane j is the scalar interior formula
// of `pixel` for x0s[j], y0s[j] and the weights (IEEE mul/add per lane).
inline __m128 Gather4(const uint8_t* img, int64_t row, const int32_t* x0s,
                      const int32_t* y0s, int dx, int dy) {
  auto at = [&](int j) {
    return static_cast<int>(img[(int64_t{y0s[j]} + dy) * row + int64_t{x0s[j]} + dx]);
  };
  return _mm_cvtepi32_ps(_mm_setr_epi32(at(0), at(1), at(2), at(3)));
}
inline __m128 Gather4(const float* img, int64_t row, const int32_t* x0s, const int32_t* y0s,
                      int dx, int dy) {
  auto at = [&](int j) { return img[(int64_t{y0s[j]} + dy) * row + int64_t{x0s[j]} + dx]; };
  return _mm_setr_ps(at(0), at(1), at(2), at(3));
}
inline void Store1x4(__m128 v, uint8_t* out) {
  // FromFloat<uint8_t> per lane (NaN -> 0 as well)
  __m128i i = _mm_cvttps_epi32(tfpipe_common::RoundSaturate4(v));
  i = _mm_packus_epi16(_mm_packs_epi32(i, i), i);
  const uint32_t u = static_cast<uint32_t>(_mm_cvtsi128_si32(i));
  std::memcpy(out, &u, 4);
}
inline void Store1x4(__m128 v, float* out) { _mm_storeu_ps(out, v); }
// Taps (x0 + j, y) and (x0 + j + 1, y), j = 0..3, of 4 consecutive source pixels
// from one 8-byte load (p + 8 must be inside the buffer): a translation's row.
inline void Row4(const uint8_t* p, __m128* left, __m128* right) {
  const __m128i zero = _mm_setzero_si128();
  const __m128i w16 = _mm_unpacklo_epi8(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), zero);  // 8 x u16
  *left = _mm_cvtepi32_ps(_mm_unpacklo_epi16(w16, zero));                        // p[0..3]
  *right = _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_srli_si128(w16, 2), zero));  // p[1..4]
}

template <typename T>
inline void Interp1x4(const T* img, int64_t row, const T* in_end, const int32_t* x0s,
                      const int32_t* y0s, const float* wx0s, const float* wx1s,
                      const float* wy0s, const float* wy1s, T* out) {
  const __m128 wx0 = _mm_load_ps(wx0s), wx1 = _mm_load_ps(wx1s);
  __m128 v00, v01, v10, v11;
  bool loaded = false;
  if constexpr (std::is_same<T, uint8_t>::value) {
    // the same tap values either way; consecutive taps on one row (a translation,
    // the medical preset) are read with one load per source row
    const T* p00 = img + int64_t{y0s[0]} * row + x0s[0];
    if (y0s[3] == y0s[0] && y0s[1] == y0s[0] && y0s[2] == y0s[0] && x0s[3] == x0s[0] + 3 &&
        x0s[1] == x0s[0] + 1 && x0s[2] == x0s[0] + 2 && p00 + row + 8 <= in_end) {
      Row4(p00, &v00, &v01);
      Row4(p00 + row, &v10, &v11);
      loaded = true;
    }
  }
  if (!loaded) {
    v00 = Gather4(img, row, x0s, y0s, 0, 0), v01 = Gather4(img, row, x0s, y0s, 1, 0);
    v10 = Gather4(img, row, x0s, y0s, 0, 1), v11 = Gather4(img, row, x0s, y0s, 1, 1);
  }
  const __m128 vf = _mm_add_ps(_mm_mul_ps(wx0, v00), _mm_mul_ps(wx1, v01));
  const __m128 vc = _mm_add_ps(_mm_mul_ps(wx0, v10), _mm_mul_ps(wx1, v11));
  Store1x4(_mm_add_ps(_mm_mul_ps(_mm_load_ps(wy0s), vf), _mm_mul_ps(_mm_load_ps(wy1s), vc)),
           out);
}

// std::floor on 4 lanes, exact for |v| < 2^31 (callers clamp to kFar).
inline __m128 Floor4(__m128 v) {
  const __m128 t = _mm_cvtepi32_ps(_mm_cvttps_epi32(v));  // toward zero
  return _mm_sub_ps(t, _mm_and_ps(_mm_cmpgt_ps(t, v), _mm_set1_ps(1.0f)));
}
#endif

// One output row of image b: columns [0, ow). kC: channels known at compile
// time (1 or 3, so the channel loops unroll), 0 = read from `a`.
template <typename T, Fill F, bool kBilinear, int kC>
void WarpRow(const Args& a, int64_t b, int64_t oy, int64_t x_begin, int64_t x_end) {
  const T* img = static_cast<const T*>(a.in) + b * a.h * a.w * a.c;
  T* out = static_cast<T*>(a.out) + ((b * a.oh + oy) * a.ow) * a.c;
  const float* t = a.transforms + b * a.transform_stride;
  const int64_t h = a.h, w = a.w, c = kC ? kC : a.c;
  const float fill = a.fill;
  [[maybe_unused]] const T* in_end = static_cast<const T*>(a.in_end);  // SSE2 paths
  const float fy = static_cast<float>(oy);
  const bool affine = t[6] == 0.0f && t[7] == 0.0f;  // projection == 1 exactly
  // Row-constant products; TF computes t1*y etc. per element -- same values.
  const float t1y = t[1] * fy, t4y = t[4] * fy, t7y = t[7] * fy;
  const int64_t row = w * c;

  auto pixel = [&](int64_t ox, T* out) {
    const float fx = static_cast<float>(ox);
    float in_x = t[0] * fx + t1y + t[2];
    float in_y = t[3] * fx + t4y + t[5];
    if (!affine) {
      const float projection = t[6] * fx + t7y + 1.f;
      if (projection == 0) {
        for (int64_t k = 0; k < c; ++k) out[k] = FromFloat<T>(fill);
        return;
      }
      in_x /= projection;
      in_y /= projection;
    }
    const float x = MapCoord<F>(in_x, w);
    const float y = MapCoord<F>(in_y, h);

    if (!kBilinear) {
      const int64_t yi = RoundIndex(y), xi = RoundIndex(x);
      if (0 <= yi && yi < h && 0 <= xi && xi < w) {
        const T* p = img + yi * row + xi * c;
        for (int64_t k = 0; k < c; ++k) out[k] = p[k];
      } else {
        for (int64_t k = 0; k < c; ++k) out[k] = FromFloat<T>(fill);
      }
      return;
    }

    const float y_floor = std::floor(y), x_floor = std::floor(x);
    const float y_ceil = y_floor + 1, x_ceil = x_floor + 1;
    const float wx0 = x_ceil - x, wx1 = x - x_floor;
    const float wy0 = y_ceil - y, wy1 = y - y_floor;
    const int64_t y0 = ToIndex(y_floor), x0 = ToIndex(x_floor);
    const int64_t y1 = y0 + 1, x1 = x0 + 1;
    if (0 <= y0 && y1 < h && 0 <= x0 && x1 < w) {  // interior: no checks per tap
      const T* p00 = img + y0 * row + x0 * c;
      const T* p01 = p00 + c;
      const T* p10 = p00 + row;
      const T* p11 = p10 + c;
#if defined(__SSE2__)
      if (kC == 3) {
        Interp3(p00, row, in_end, wx0, wx1, wy0, wy1, out);
        return;
      }
#endif
      for (int64_t k = 0; k < c; ++k) {
        const float vf = wx0 * static_cast<float>(p00[k]) + wx1 * static_cast<float>(p01[k]);
        const float vc = wx0 * static_cast<float>(p10[k]) + wx1 * static_cast<float>(p11[k]);
        out[k] = FromFloat<T>(wy0 * vf + wy1 * vc);
      }
      return;
    }
    if (y1 < 0 || y0 >= h || x1 < 0 || x0 >= w) {  // all four taps are fill
      // TF still interpolates fill with itself; fill*(w0+w1) may differ from
      // fill in the last bit, so compute it the same way.
      const float vf = wx0 * fill + wx1 * fill;
      const float v = wy0 * vf + wy1 * vf;
      for (int64_t k = 0; k < c; ++k) out[k] = FromFloat<T>(v);
      return;
    }
    // Border: read_with_fill_value per tap.
    const bool in00 = 0 <= y0 && y0 < h && 0 <= x0 && x0 < w;
    const bool in01 = 0 <= y0 && y0 < h && 0 <= x1 && x1 < w;
    const bool in10 = 0 <= y1 && y1 < h && 0 <= x0 && x0 < w;
    const bool in11 = 0 <= y1 && y1 < h && 0 <= x1 && x1 < w;
    const T* p00 = img + y0 * row + x0 * c;  // only dereferenced when inside
    for (int64_t k = 0; k < c; ++k) {
      const float v00 = in00 ? static_cast<float>(p00[k]) : fill;
      const float v01 = in01 ? static_cast<float>(p00[c + k]) : fill;
      const float v10 = in10 ? static_cast<float>(p00[row + k]) : fill;
      const float v11 = in11 ? static_cast<float>(p00[row + c + k]) : fill;
      const float vf = wx0 * v00 + wx1 * v01;
      const float vc = wx0 * v10 + wx1 * v11;
      out[k] = FromFloat<T>(wy0 * vf + wy1 * vc);
    }
  };

#if defined(__SSE2__)
  // Nearest fast path (affine, 1 or 3 channels, constant/nearest fill: class masks
  // follow every rotation through here): the source coordinates and `RoundIndex`
  // of 4 pixels at a time with `pixel`'s float ops in its order (so the same
  // indices), then a scalar copy or fill per pixel. The clamps put the constant
  // second (`_mm_max_ps(lo, v)`) so that a NaN coordinate stays NaN as in
  // std::max(v, lo), truncates to INT32_MIN and is filled, as the scalar path does.
  if (!kBilinear && (kC == 3 || kC == 1) && affine &&
      (F == Fill::kConstant || F == Fill::kNearest)) {
    constexpr int kChunk = 64;
    alignas(16) int32_t xis[kChunk], yis[kChunk];
    const __m128 t0 = _mm_set1_ps(t[0]), t2 = _mm_set1_ps(t[2]), t1yv = _mm_set1_ps(t1y);
    const __m128 t3 = _mm_set1_ps(t[3]), t5 = _mm_set1_ps(t[5]), t4yv = _mm_set1_ps(t4y);
    const __m128 zero = _mm_setzero_ps(), half = _mm_set1_ps(0.5f), nhalf = _mm_set1_ps(-0.5f);
    const __m128 wmax = _mm_set1_ps(static_cast<float>(w - 1));
    const __m128 hmax = _mm_set1_ps(static_cast<float>(h - 1));
    const __m128 lo = _mm_set1_ps(-kFar), hi = _mm_set1_ps(kFar);
    const __m128 lanes = _mm_setr_ps(0.f, 1.f, 2.f, 3.f);
    auto round_index = [&](__m128 v) {  // RoundIndex on 4 lanes
      const __m128 c4 = _mm_min_ps(hi, _mm_max_ps(lo, v));
      __m128i r = _mm_cvttps_epi32(c4);
      const __m128 frac = _mm_sub_ps(c4, _mm_cvtepi32_ps(r));
      r = _mm_sub_epi32(r, _mm_castps_si128(_mm_cmpge_ps(frac, half)));   // +1
      return _mm_add_epi32(r, _mm_castps_si128(_mm_cmple_ps(frac, nhalf)));  // -1
    };
    const T fill_t = FromFloat<T>(fill);
    for (int64_t begin = x_begin; begin < x_end; begin += kChunk) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, x_end - begin));
      for (int i = 0; i < n; i += 4) {
        const __m128 fx = _mm_add_ps(_mm_set1_ps(static_cast<float>(begin + i)), lanes);
        __m128 x = _mm_add_ps(_mm_add_ps(_mm_mul_ps(t0, fx), t1yv), t2);
        __m128 y = _mm_add_ps(_mm_add_ps(_mm_mul_ps(t3, fx), t4yv), t5);
        if (F == Fill::kNearest) {  // MapCoord: std::min(std::max(in, 0), len - 1)
          x = _mm_min_ps(wmax, _mm_max_ps(zero, x));
          y = _mm_min_ps(hmax, _mm_max_ps(zero, y));
        }
        _mm_store_si128(reinterpret_cast<__m128i*>(xis + i), round_index(x));
        _mm_store_si128(reinterpret_cast<__m128i*>(yis + i), round_index(y));
      }
      T* o = out + begin * kC;
      for (int i = 0; i < n; ++i, o += kC) {
        const int64_t xi = xis[i], yi = yis[i];
        if (0 <= yi && yi < h && 0 <= xi && xi < w) {
          const T* p = img + yi * row + xi * kC;
          for (int k = 0; k < kC; ++k) o[k] = p[k];
        } else {
          for (int k = 0; k < kC; ++k) o[k] = fill_t;
        }
      }
    }
    return;
  }
  // Fast path (affine, 3 channels or 1 (grayscale), constant/nearest fill):
  // source coordinates, floors, weights and the all-taps-inside test for 4 pixels
  // at a time, with the same float ops as the scalar path (so the same values),
  // then the interior pixels; the rest go through `pixel`.
  if (kBilinear && (kC == 3 || kC == 1) && affine &&
      (F == Fill::kConstant || F == Fill::kNearest)) {
    constexpr int kChunk = 64;
    alignas(16) float wx0s[kChunk], wx1s[kChunk], wy0s[kChunk], wy1s[kChunk];
    alignas(16) int32_t x0s[kChunk], y0s[kChunk];
    const __m128 t0 = _mm_set1_ps(t[0]), t2 = _mm_set1_ps(t[2]), t1yv = _mm_set1_ps(t1y);
    const __m128 t3 = _mm_set1_ps(t[3]), t5 = _mm_set1_ps(t[5]), t4yv = _mm_set1_ps(t4y);
    const __m128 one = _mm_set1_ps(1.0f), zero = _mm_setzero_ps();
    const __m128 wmax = _mm_set1_ps(static_cast<float>(w - 1));
    const __m128 hmax = _mm_set1_ps(static_cast<float>(h - 1));
    const __m128 lo = _mm_set1_ps(-kFar), hi = _mm_set1_ps(kFar);
    const __m128 lanes = _mm_setr_ps(0.f, 1.f, 2.f, 3.f);
    const __m128i neg1 = _mm_set1_epi32(-1);
    // x0 + 1 < w  <=>  x0 < w - 1 (sizes fit int32: TF shapes of images do)
    const __m128i xlim = _mm_set1_epi32(static_cast<int32_t>(w - 1));
    const __m128i ylim = _mm_set1_epi32(static_cast<int32_t>(h - 1));
    for (int64_t begin = x_begin; begin < x_end; begin += kChunk) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, x_end - begin));
      uint64_t interior = 0;  // bit i: all four taps of pixel begin + i inside
      for (int i = 0; i < n; i += 4) {
        // integer-valued floats below 2^24: exact, = static_cast<float>(ox)
        const __m128 fx = _mm_add_ps(_mm_set1_ps(static_cast<float>(begin + i)), lanes);
        __m128 x = _mm_add_ps(_mm_add_ps(_mm_mul_ps(t0, fx), t1yv), t2);
        __m128 y = _mm_add_ps(_mm_add_ps(_mm_mul_ps(t3, fx), t4yv), t5);
        if (F == Fill::kNearest) {
          x = _mm_min_ps(_mm_max_ps(x, zero), wmax);
          y = _mm_min_ps(_mm_max_ps(y, zero), hmax);
        }
        const __m128 xf = Floor4(_mm_min_ps(_mm_max_ps(x, lo), hi));
        const __m128 yf = Floor4(_mm_min_ps(_mm_max_ps(y, lo), hi));
        _mm_store_ps(wx0s + i, _mm_sub_ps(_mm_add_ps(xf, one), x));
        _mm_store_ps(wx1s + i, _mm_sub_ps(x, xf));
        _mm_store_ps(wy0s + i, _mm_sub_ps(_mm_add_ps(yf, one), y));
        _mm_store_ps(wy1s + i, _mm_sub_ps(y, yf));
        const __m128i xi = _mm_cvttps_epi32(xf), yi = _mm_cvttps_epi32(yf);
        _mm_store_si128(reinterpret_cast<__m128i*>(x0s + i), xi);
        _mm_store_si128(reinterpret_cast<__m128i*>(y0s + i), yi);
        const __m128i in = _mm_and_si128(
            _mm_and_si128(_mm_cmpgt_epi32(xi, neg1), _mm_cmplt_epi32(xi, xlim)),
            _mm_and_si128(_mm_cmpgt_epi32(yi, neg1), _mm_cmplt_epi32(yi, ylim)));
        interior |= static_cast<uint64_t>(_mm_movemask_ps(_mm_castsi128_ps(in))) << i;
      }
      T* o = out + begin * kC;
      for (int i = 0; i < n; ++i, o += kC) {
        if constexpr (kC == 1) {
          // 4 interior grayscale pixels at once: the scalar formula below on 4
          // lanes (taps gathered, weights from the chunk arrays), same bits
          if ((i & 3) == 0 && i + 4 <= n && ((interior >> i) & 0xF) == 0xF) {
            Interp1x4(img, row, in_end, x0s + i, y0s + i, wx0s + i, wx1s + i, wy0s + i, wy1s + i, o);
            i += 3, o += 3;
            continue;
          }
        }
        if ((interior >> i) & 1) {
          const T* p00 = img + int64_t{y0s[i]} * row + int64_t{x0s[i]} * kC;
          if constexpr (kC == 3) {
            Interp3(p00, row, in_end, wx0s[i], wx1s[i], wy0s[i], wy1s[i], o);
          } else {  // the scalar interior formula of `pixel`, one channel
            const float vf = wx0s[i] * static_cast<float>(p00[0]) +
                             wx1s[i] * static_cast<float>(p00[1]);
            const float vc = wx0s[i] * static_cast<float>(p00[row]) +
                             wx1s[i] * static_cast<float>(p00[row + 1]);
            o[0] = FromFloat<T>(wy0s[i] * vf + wy1s[i] * vc);
          }
        } else {
          pixel(begin + i, o);
        }
      }
    }
    return;
  }
#endif
  for (int64_t ox = x_begin; ox < x_end; ++ox) pixel(ox, out + ox * c);
}

// An axis-aligned affine transform (t1 == t3 == 0: translation and/or scale,
// no rotation/shear/projection): a pixel's source x depends on its output
// column only and its source y on its output row only, so coordinates, fill-mode
// folding, floors, weights, tap indices and in-bounds flags are computed once per
// column (per tile) and once per row instead of once per pixel, with `pixel`'s
// float32 expressions in its order, so the values are the same bits:
// t1 * fy == t1 and t3 * fx == t3 exactly (a signed zero times a finite
// non-negative float keeps its sign), hence per column
// in_x = (t0*fx + t1*fy) + t2 and per row in_y = (t3*fx + t4*fy) + t5 are the
// per-pixel values. The blend is then `pixel`'s formula on those arrays (4
// grayscale pixels per SSE2 step, per-lane IEEE mul/add: the same bits).
inline bool AxisAligned(const float* t) {
  return t[1] == 0.0f && t[3] == 0.0f && t[6] == 0.0f && t[7] == 0.0f;
}

#if defined(__SSE2__)
// Taps r[xs[j] + dx], j = 0..3, of one source row as 4 float lanes.
inline __m128 Taps4(const uint8_t* r, const int32_t* xs, int dx) {
  return _mm_cvtepi32_ps(_mm_setr_epi32(r[xs[0] + dx], r[xs[1] + dx], r[xs[2] + dx],
                                        r[xs[3] + dx]));
}
inline __m128 Taps4(const float* r, const int32_t* xs, int dx) {
  return _mm_setr_ps(r[xs[0] + dx], r[xs[1] + dx], r[xs[2] + dx], r[xs[3] + dx]);
}
#endif

// Output rows [y_begin, y_end) of image b, all columns, for an axis-aligned
// transform (AxisAligned(t) for b).
template <typename T, Fill F, bool kBilinear, int kC>
void WarpTileAxis(const Args& a, int64_t b, int64_t y_begin, int64_t y_end) {
  const T* img = static_cast<const T*>(a.in) + b * a.h * a.w * a.c;
  const float* t = a.transforms + b * a.transform_stride;
  const int64_t h = a.h, w = a.w, c = kC ? kC : a.c, ow = a.ow;
  const int64_t row = w * c;
  const float fill = a.fill;
  [[maybe_unused]] const T* in_end = static_cast<const T*>(a.in_end);  // SSE2 paths
  // t1 * fy for any output row fy >= 0 (the same bits for every row: see above)
  const float t1y = t[1] * static_cast<float>(y_begin);
  const float t3x = t[3];  // t3 * fx for any output column fx >= 0, likewise
  constexpr int kChunk = 256;
  // per column: weights, left tap index (x0; xi for nearest), tap-inside flags
  alignas(16) float wx0s[kChunk], wx1s[kChunk];
  alignas(16) int32_t x0s[kChunk];
  bool in0s[kChunk], in1s[kChunk];
  uint8_t kind[kChunk];  // 0: both taps inside, 1: both outside, 2: one each
  for (int64_t begin = 0; begin < ow; begin += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, ow - begin));
    for (int i = 0; i < n; ++i) {
      const float fx = static_cast<float>(begin + i);
      const float x = MapCoord<F>(t[0] * fx + t1y + t[2], w);
      if (!kBilinear) {
        const int64_t xi = RoundIndex(x);
        in0s[i] = 0 <= xi && xi < w;
        x0s[i] = in0s[i] ? static_cast<int32_t>(xi) : 0;
        continue;
      }
      const float x_floor = std::floor(x);
      const float x_ceil = x_floor + 1;
      wx0s[i] = x_ceil - x, wx1s[i] = x - x_floor;
      const int64_t x0 = ToIndex(x_floor), x1 = x0 + 1;
      in0s[i] = 0 <= x0 && x0 < w, in1s[i] = 0 <= x1 && x1 < w;
      kind[i] = (0 <= x0 && x1 < w) ? 0 : (x1 < 0 || x0 >= w) ? 1 : 2;
      // only used when in0s/in1s say the tap is inside: clamp so it fits int32
      x0s[i] = static_cast<int32_t>(std::min<int64_t>(std::max<int64_t>(x0, -1), w));
    }
    // per group of 4 columns: 0 = not all interior, 1 = interior, 2 = interior
    // with consecutive taps (a translation: one load per source row)
    uint8_t group[kChunk / 4];
    if (kBilinear) {
      for (int g = 0; g * 4 + 4 <= n; ++g) {
        const int i = g * 4;
        const int32_t* xs = x0s + i;
        group[g] = (kind[i] | kind[i + 1] | kind[i + 2] | kind[i + 3]) != 0 ? 0
                   : (xs[1] == xs[0] + 1 && xs[2] == xs[0] + 2 && xs[3] == xs[0] + 3) ? 2
                                                                                        : 1;
      }
    }
    for (int64_t oy = y_begin; oy < y_end; ++oy) {
      T* out = static_cast<T*>(a.out) + ((b * a.oh + oy) * ow + begin) * c;
      const float fy = static_cast<float>(oy);
      const float y = MapCoord<F>(t3x + t[4] * fy + t[5], h);
      if (!kBilinear) {
        const int64_t yi = RoundIndex(y);
        const bool rin = 0 <= yi && yi < h;
        const T* r = img + (rin ? yi : 0) * row;
        for (int i = 0; i < n; ++i, out += c) {
          if (rin && in0s[i]) {
            const T* p = r + int64_t{x0s[i]} * c;
            for (int64_t k = 0; k < c; ++k) out[k] = p[k];
          } else {
            for (int64_t k = 0; k < c; ++k) out[k] = FromFloat<T>(fill);
          }
        }
        continue;
      }
      const float y_floor = std::floor(y);
      const float y_ceil = y_floor + 1;
      const float wy0 = y_ceil - y, wy1 = y - y_floor;
      const int64_t y0 = ToIndex(y_floor), y1 = y0 + 1;
      const bool rin0 = 0 <= y0 && y0 < h, rin1 = 0 <= y1 && y1 < h;
      const bool r_inside = 0 <= y0 && y1 < h, r_outside = y1 < 0 || y0 >= h;
      // row pointers, only dereferenced when the row's tap is inside
      const T* r0 = img + (rin0 ? y0 : 0) * row;
      const T* r1 = img + (rin1 ? y1 : 0) * row;
      // `pixel` from the precomputed column i and this row
      auto one = [&](int i, T* o) {
        const float wx0 = wx0s[i], wx1 = wx1s[i];
        if (r_inside && kind[i] == 0) {  // interior
          const T* p00 = r0 + int64_t{x0s[i]} * c;
          const T* p10 = r1 + int64_t{x0s[i]} * c;
#if defined(__SSE2__)
          if (kC == 3) {
            Interp3(p00, row, in_end, wx0, wx1, wy0, wy1, o);
            return;
          }
#endif
          for (int64_t k = 0; k < c; ++k) {
            const float vf =
                wx0 * static_cast<float>(p00[k]) + wx1 * static_cast<float>(p00[c + k]);
            const float vc =
                wx0 * static_cast<float>(p10[k]) + wx1 * static_cast<float>(p10[c + k]);
            o[k] = FromFloat<T>(wy0 * vf + wy1 * vc);
          }
          return;
        }
        if (r_outside || kind[i] == 1) {  // all four taps are fill
          const float vf = wx0 * fill + wx1 * fill;
          const float v = wy0 * vf + wy1 * vf;
          for (int64_t k = 0; k < c; ++k) o[k] = FromFloat<T>(v);
          return;
        }
        const bool in00 = rin0 && in0s[i], in01 = rin0 && in1s[i];
        const bool in10 = rin1 && in0s[i], in11 = rin1 && in1s[i];
        const int64_t xo = int64_t{x0s[i]} * c;
        for (int64_t k = 0; k < c; ++k) {
          const float v00 = in00 ? static_cast<float>(r0[xo + k]) : fill;
          const float v01 = in01 ? static_cast<float>(r0[xo + c + k]) : fill;
          const float v10 = in10 ? static_cast<float>(r1[xo + k]) : fill;
          const float v11 = in11 ? static_cast<float>(r1[xo + c + k]) : fill;
          const float vf = wx0 * v00 + wx1 * v01;
          const float vc = wx0 * v10 + wx1 * v11;
          o[k] = FromFloat<T>(wy0 * vf + wy1 * vc);
        }
      };
      int i = 0;
#if defined(__SSE2__)
      if (kC == 1 && r_inside) {
        const __m128 wy0v = _mm_set1_ps(wy0), wy1v = _mm_set1_ps(wy1);
        for (; i + 4 <= n; i += 4) {
          const uint8_t g = group[i / 4];
          if (g == 0) {
            for (int j = i; j < i + 4; ++j) one(j, out + j);
            continue;
          }
          const int32_t* xs = x0s + i;
          __m128 v00, v01, v10, v11;
          const bool run = g == 2;
          if constexpr (std::is_same<T, uint8_t>::value) {
            if (run && r1 + xs[0] + 8 <= in_end) {
              Row4(r0 + xs[0], &v00, &v01);
              Row4(r1 + xs[0], &v10, &v11);
            } else {
              v00 = Taps4(r0, xs, 0), v01 = Taps4(r0, xs, 1);
              v10 = Taps4(r1, xs, 0), v11 = Taps4(r1, xs, 1);
            }
          } else {
            if (run) {  // x0 + 4 < w: inside the row
              v00 = _mm_loadu_ps(r0 + xs[0]), v01 = _mm_loadu_ps(r0 + xs[0] + 1);
              v10 = _mm_loadu_ps(r1 + xs[0]), v11 = _mm_loadu_ps(r1 + xs[0] + 1);
            } else {
              v00 = Taps4(r0, xs, 0), v01 = Taps4(r0, xs, 1);
              v10 = Taps4(r1, xs, 0), v11 = Taps4(r1, xs, 1);
            }
          }
          const __m128 wx0 = _mm_load_ps(wx0s + i), wx1 = _mm_load_ps(wx1s + i);
          const __m128 vf = _mm_add_ps(_mm_mul_ps(wx0, v00), _mm_mul_ps(wx1, v01));
          const __m128 vc = _mm_add_ps(_mm_mul_ps(wx0, v10), _mm_mul_ps(wx1, v11));
          Store1x4(_mm_add_ps(_mm_mul_ps(wy0v, vf), _mm_mul_ps(wy1v, vc)), out + i);
        }
      }
#endif
      for (; i < n; ++i) one(i, out + i * c);
    }
  }
}

using RowFn = void (*)(const Args&, int64_t, int64_t, int64_t, int64_t);
using TileFn = void (*)(const Args&, int64_t, int64_t, int64_t);
struct Fns {
  RowFn row;    // any transform, one output row
  TileFn axis;  // AxisAligned transforms, a block of output rows
};

// Output tiles of kTileRows x kTileCols, each done column strip by row: a
// rotated row walks across many source rows, and a narrow strip keeps the
// source lines that consecutive output rows share in L1 (as cv2.warpAffine's
// blocks do).
constexpr int64_t kTileRows = 32, kTileCols = 64;

void WarpTile(RowFn fn, const Args& a, int64_t b, int64_t y_begin, int64_t y_end) {
  for (int64_t x = 0; x < a.ow; x += kTileCols) {
    const int64_t x_end = std::min(a.ow, x + kTileCols);
    for (int64_t y = y_begin; y < y_end; ++y) fn(a, b, y, x, x_end);
  }
}

template <typename T, Fill F, bool kBilinear>
Fns PickChannels(int64_t c) {
  if (c == 3) return {&WarpRow<T, F, kBilinear, 3>, &WarpTileAxis<T, F, kBilinear, 3>};
  if (c == 1) return {&WarpRow<T, F, kBilinear, 1>, &WarpTileAxis<T, F, kBilinear, 1>};
  return {&WarpRow<T, F, kBilinear, 0>, &WarpTileAxis<T, F, kBilinear, 0>};
}

template <typename T, Fill F>
Fns PickInterp(bool bilinear, int64_t c) {
  return bilinear ? PickChannels<T, F, true>(c) : PickChannels<T, F, false>(c);
}

template <typename T>
Fns Pick(Fill fill, bool bilinear, int64_t c) {
  switch (fill) {
    case Fill::kConstant: return PickInterp<T, Fill::kConstant>(bilinear, c);
    case Fill::kReflect: return PickInterp<T, Fill::kReflect>(bilinear, c);
    case Fill::kWrap: return PickInterp<T, Fill::kWrap>(bilinear, c);
    case Fill::kNearest: return PickInterp<T, Fill::kNearest>(bilinear, c);
  }
  return {nullptr, nullptr};
}

template <typename T>
class AffineWarpOp : public OpKernel {
 public:
  explicit AffineWarpOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string interp, fill;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("interpolation", &interp));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("fill_mode", &fill));
    bilinear_ = interp == "BILINEAR";
    fill_ = fill == "REFLECT" ? Fill::kReflect
            : fill == "WRAP"  ? Fill::kWrap
            : fill == "NEAREST" ? Fill::kNearest
                                : Fill::kConstant;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    const Tensor& transforms = ctx->input(1);
    const Tensor& shape = ctx->input(2);
    const Tensor& fill_value = ctx->input(3);
    OP_REQUIRES(ctx, images.dims() == 4,
                errors::InvalidArgument("images must be [B, H, W, C], got ",
                                        images.shape().DebugString()));
    const int64_t batch = images.dim_size(0);
    OP_REQUIRES(ctx, transforms.dims() == 2 && transforms.dim_size(1) == 8 &&
                         (transforms.dim_size(0) == 1 || transforms.dim_size(0) == batch),
                errors::InvalidArgument("transforms must be [1, 8] or [", batch,
                                        ", 8], got ", transforms.shape().DebugString()));
    OP_REQUIRES(ctx, shape.dims() == 1 && shape.NumElements() == 2,
                errors::InvalidArgument("output_shape must be [2] (height, width), got ",
                                        shape.shape().DebugString()));
    OP_REQUIRES(ctx, TensorShapeUtils::IsScalar(fill_value.shape()),
                errors::InvalidArgument("fill_value must be a scalar"));
    const int32_t oh = shape.vec<int32>()(0), ow = shape.vec<int32>()(1);
    OP_REQUIRES(ctx, oh > 0 && ow > 0,
                errors::InvalidArgument("output_shape must be positive, got [", oh, ", ",
                                        ow, "]"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(
                            0, TensorShape({batch, oh, ow, images.dim_size(3)}), &out));
    if (out->NumElements() == 0) return;
    OP_REQUIRES(ctx, images.dim_size(1) > 0 && images.dim_size(2) > 0,
                errors::InvalidArgument("images must not be empty, got ",
                                        images.shape().DebugString()));

    Args a;
    a.in = images.data();
    a.in_end = images.flat<T>().data() + images.NumElements();
    a.out = out->data();
    a.transforms = transforms.flat<float>().data();
    a.transform_stride = transforms.dim_size(0) == 1 ? 0 : 8;
    a.h = images.dim_size(1);
    a.w = images.dim_size(2);
    a.c = images.dim_size(3);
    a.oh = oh;
    a.ow = ow;
    a.fill = fill_value.scalar<float>()();
    const Fns fns = Pick<T>(fill_, bilinear_, a.c);

    const int64_t blocks = (oh + kTileRows - 1) / kTileRows;  // row blocks per image
    auto run = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t b = r / blocks, y = (r % blocks) * kTileRows;
        const int64_t y_end = std::min<int64_t>(oh, y + kTileRows);
        if (AxisAligned(a.transforms + b * a.transform_stride)) {
          fns.axis(a, b, y, y_end);
        } else {
          WarpTile(fns.row, a, b, y, y_end);
        }
      }
    };
    if (batch == 1) {  // the tf.data map case: the map already runs images in parallel
      run(0, blocks);
      return;
    }
    auto* workers = ctx->device()->tensorflow_cpu_worker_threads();
    const int64_t cost = kTileRows * ow * a.c * (bilinear_ ? 12 : 4);  // rough cycles
    Shard(workers->num_threads, workers->workers, batch * blocks, cost, run);
  }

 private:
  bool bilinear_ = true;
  Fill fill_ = Fill::kConstant;
};

}  // namespace

REGISTER_KERNEL_BUILDER(
    Name("TfpipeAffineWarp").Device(DEVICE_CPU).TypeConstraint<uint8>("dtype"),
    AffineWarpOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("TfpipeAffineWarp").Device(DEVICE_CPU).TypeConstraint<float>("dtype"),
    AffineWarpOp<float>);
