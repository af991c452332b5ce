/// \file
/// What the CUDA C sources of volt::nn's runtime kernels share (volt/nn/detail/runtime_kernel.hpp compiles them):
/// the code of each tensor type in a source, and the device functions that load and store float, bfloat16 and half
/// values as float. Plain strings, no CUDA header: NVRTC compiles them as they are, also on a machine without a GPU.
#pragma once

#include <c10/core/ScalarType.h>

#include <string>

namespace volt::nn::detail {

/// The code of a tensor type in the kernels' sources: 0 float, 1 bfloat16, 2 half; -1 for any other type.
inline int kernel_type_code(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return 0;
    case c10::ScalarType::BFloat16: return 1;
    case c10::ScalarType::Half: return 2;
    default: return -1;
  }
}

/// CUDA C that defines volt_u16 and volt_i64, the bfloat16 and half conversions (round to nearest even, NaN kept)
/// and `volt_io<K>` for a type code K: its element type T, load/store of 4 consecutive values (8- or 16-byte
/// aligned) and load1/store1 of one, all as float, and round(v) (v rounded to T, as float); and volt_warp_sum.
inline std::string kernel_value_io_source() {
  return R"CUDA(
typedef unsigned short volt_u16;
typedef long long volt_i64;

__forceinline__ float volt_bf16_to_float(unsigned bits) { return __uint_as_float(bits << 16); }
__forceinline__ unsigned volt_float_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return ((u >> 16) | 0x40u) & 0xffffu;
  u += 0x7fffu + ((u >> 16) & 1u);
  return u >> 16;
}
__forceinline__ float volt_half_to_float(unsigned bits) {
  float f;
  volt_u16 h = (volt_u16)bits;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__forceinline__ unsigned volt_float_to_half(float f) {
  volt_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

struct alignas(16) volt_f4 { float v[4]; };
struct alignas(8) volt_h4 { unsigned v[2]; };

// Loads and stores of 4 consecutive values as float, for a type code K.
template <int K> struct volt_io;
template <> struct volt_io<0> {
  typedef float T;
  static __forceinline__ void load(const T* p, volt_i64 i, float out[4]) {
    const volt_f4 q = *reinterpret_cast<const volt_f4*>(p + i);
    for (int j = 0; j < 4; ++j) out[j] = q.v[j];
  }
  static __forceinline__ void store(T* p, volt_i64 i, const float in[4]) {
    volt_f4 q;
    for (int j = 0; j < 4; ++j) q.v[j] = in[j];
    *reinterpret_cast<volt_f4*>(p + i) = q;
  }
  static __forceinline__ float round(float v) { return v; }
  static __forceinline__ float load1(const T* p, volt_i64 i) { return p[i]; }
  static __forceinline__ void store1(T* p, volt_i64 i, float v) { p[i] = v; }
};
template <int K> struct volt_io16 {
  typedef volt_u16 T;
  static __forceinline__ float to_float(unsigned b) { return K == 1 ? volt_bf16_to_float(b) : volt_half_to_float(b); }
  static __forceinline__ unsigned from_float(float f) { return K == 1 ? volt_float_to_bf16(f) : volt_float_to_half(f); }
  static __forceinline__ void load(const T* p, volt_i64 i, float out[4]) {
    const volt_h4 q = *reinterpret_cast<const volt_h4*>(p + i);
    out[0] = to_float(q.v[0] & 0xffffu);
    out[1] = to_float(q.v[0] >> 16);
    out[2] = to_float(q.v[1] & 0xffffu);
    out[3] = to_float(q.v[1] >> 16);
  }
  static __forceinline__ void store(T* p, volt_i64 i, const float in[4]) {
    volt_h4 q;
    q.v[0] = from_float(in[0]) | (from_float(in[1]) << 16);
    q.v[1] = from_float(in[2]) | (from_float(in[3]) << 16);
    *reinterpret_cast<volt_h4*>(p + i) = q;
  }
  static __forceinline__ float round(float v) { return to_float(from_float(v)); }
  static __forceinline__ float load1(const T* p, volt_i64 i) { return to_float(p[i]); }
  static __forceinline__ void store1(T* p, volt_i64 i, float v) { p[i] = (T)from_float(v); }
};
template <> struct volt_io<1> : volt_io16<1> {};
template <> struct volt_io<2> : volt_io16<2> {};

// The sum of s over the warp's 32 lanes, in every lane.
__forceinline__ float volt_warp_sum(float s) {
  for (int offset = 16; offset > 0; offset >>= 1) s += __shfl_xor_sync(0xffffffffu, s, offset);
  return s;
}

)CUDA";
}

}  // namespace volt::nn::detail
