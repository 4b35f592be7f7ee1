// What several kernels need bit for bit the same: TF's stateless Philox seeding and
// the uint8 rounding (tf.round, half to even, then the saturation to [0, 255]).
// One copy here, included by every kernel that needs it (build.py ships it with the
// sources and hashes it into the library's key).
//
// The rounding without a libm call: on [0, 2^23), (v + 2^23) - 2^23 is v rounded half
// to even in the default rounding mode (an inline nearbyintf, which is a libm call
// without SSE4.1; the build has no -march). The compiler keeps the two operations:
// no -ffast-math.

#ifndef TFPIPE_NATIVE_COMMON_H_
#define TFPIPE_NATIVE_COMMON_H_

#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tensorflow/core/lib/random/philox_random.h"

namespace tfpipe_common {

using Philox = tensorflow::random::PhiloxRandom;

// The generator of a stateless op's seed [s0, s1] (alg "philox"): TF's GenerateKey
// (core/kernels/stateless_random_ops.cc) / _philox_scramble_seed.
inline Philox PhiloxFromSeed(int64_t s0, int64_t s1) {
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

constexpr float kRoundMagic = 8388608.0f;  // 2^23

// v rounded half to even, for v in [0, 2^23) (callers clip first)
inline float RoundHalfEven(float v) { return (v + kRoundMagic) - kRoundMagic; }

// tf.saturate_cast<uint8>(tf.round(v)); NaN gives 0. Clamping first gives the same
// bytes as rounding first for every other v.
inline uint8_t RoundSaturateU8(float v) {
  if (!(v > 0.0f)) return 0;
  if (v >= 255.0f) return 255;
  return static_cast<uint8_t>(RoundHalfEven(v));
}

#if defined(__SSE2__)
// RoundHalfEven on 4 lanes, each in [0, 2^23)
inline __m128 RoundHalfEven4(__m128 v) {
  const __m128 magic = _mm_set1_ps(kRoundMagic);
  return _mm_sub_ps(_mm_add_ps(v, magic), magic);
}

// RoundSaturateU8 on 4 lanes, as floats (integers in [0, 255]); maxps(NaN, 0) = 0
// maps NaN to 0 as well
inline __m128 RoundSaturate4(__m128 v) {
  return RoundHalfEven4(_mm_min_ps(_mm_max_ps(v, _mm_setzero_ps()), _mm_set1_ps(255.0f)));
}
#endif

}  // namespace tfpipe_common

#endif  // TFPIPE_NATIVE_COMMON_H_
