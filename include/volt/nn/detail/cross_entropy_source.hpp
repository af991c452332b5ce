/// \file
/// The CUDA C source of volt::nn::functional::cross_entropy's kernels (compiled at run time by
/// volt/nn/detail/cross_entropy_kernels.hpp), generated per class count and logit type. Plain strings: no CUDA
/// header is needed to build it, and the sources compile with NVRTC on a machine without a GPU (the tests do).
///
/// One warp per row of `classes` logits. Forward: one pass over the row with a running maximum and a running sum of
/// exp(x - maximum), rescaled when the maximum grows (the "online" log-sum-exp), so any class count is read once and
/// nothing of the row's size is written; it writes the row's loss and its log-sum-exp, in float32:
///   loss = (1 - s) * (lse - x[target]) + s * (lse - mean(x)),   lse = log(sum(exp(x)))
/// with s the label smoothing (0 for none); 0 for a row whose target is ignore_index; NaN for a target outside
/// [0, classes) (LibTorch stops the process with a device-side assert there). Backward: one pass that reads the row
/// again and writes
///   dx = g * (exp(x - lse) - (1 - s) * [class == target] - s / classes)
/// with g the row's loss gradient (0 for an ignored row). Arithmetic is float32 for every logit type, as LibTorch's
/// log_softmax and nll_loss accumulate. No atomics: results are the same from run to run.
#pragma once

#include <volt/nn/detail/kernel_source_common.hpp>

#include <cstdint>
#include <string>
#include <tuple>

namespace volt::nn::detail {

/// What one compiled variant is for: the class count, the logits' type code (kernel_type_code), whether rows are
/// read 4 values at a time (classes a multiple of 4 and the logits 16-byte aligned) and whether label smoothing
/// is on (the forward then also sums each row).
struct CrossEntropyVariant {
  std::int64_t classes = 0;
  int x_type = 0;
  bool vector = false, smoothing = false;
  auto key() const { return std::make_tuple(classes, x_type, vector, smoothing); }
};

/// The CUDA C source of both kernels for one variant (NVRTC compiles it as it is). Arguments, `forward`: x, target
/// (int64), loss (float32 [rows]), lse (float32 [rows]), rows, ignore_index, smoothing; `backward`: x, target, lse,
/// grad (float32; grad[row * grad_stride] is the row's loss gradient), grad_stride, dx, rows, ignore_index,
/// smoothing.
inline std::string cross_entropy_source(const CrossEntropyVariant& v) {
  const std::int64_t width = v.vector ? 4 : 1;
  // Accesses per lane in one tile: up to 8 loads in flight, fewer for short rows.
  const std::int64_t per_round = 32 * width;
  std::int64_t unroll = (v.classes + per_round - 1) / per_round;
  if (unroll > 8) unroll = 8;
  if (unroll < 1) unroll = 1;
  std::string source = "#define VOLT_C " + std::to_string(v.classes) + "LL\n#define VOLT_X " +
                       std::to_string(v.x_type) + "\n#define VOLT_WIDTH " + std::to_string(width) +
                       "\n#define VOLT_UNROLL " + std::to_string(unroll) + "\n#define VOLT_SMOOTH " +
                       std::to_string(v.smoothing ? 1 : 0) + "\n";
  source += R"CUDA(
#define VOLT_WARPS 8
#define VOLT_INF __int_as_float(0x7f800000)
#define VOLT_TILE (32 * VOLT_WIDTH * VOLT_UNROLL)
)CUDA" + kernel_value_io_source() + R"CUDA(
typedef volt_io<VOLT_X> volt_x;

// The lane's values at `start` + (u * 32 + lane) * VOLT_WIDTH; `missing` past the row's end.
__forceinline__ void volt_load_tile(const volt_x::T* x, volt_i64 base, volt_i64 start, int lane, float missing,
                                    float v[VOLT_UNROLL][VOLT_WIDTH]) {
#pragma unroll
  for (int u = 0; u < VOLT_UNROLL; ++u) {
    const volt_i64 c = start + (volt_i64)(u * 32 + lane) * VOLT_WIDTH;
    if (c < VOLT_C) {
#if VOLT_WIDTH == 4
      volt_x::load(x, base + c, v[u]);
#else
      v[u][0] = volt_x::load1(x, base + c);
#endif
    } else {
      for (int j = 0; j < VOLT_WIDTH; ++j) v[u][j] = missing;
    }
  }
}

// Merges the running (maximum m, sum s of exp(x - m)) of two parts of a row. A part that saw only -inf has m = -inf
// and s = 0, and contributes nothing (exp(-inf - finite) = 0); if both did, the result stays (-inf, 0).
__forceinline__ void volt_merge(float& m, float& s, float m2, float s2) {
  const float top = fmaxf(m, m2);
  const float shift = top == -VOLT_INF ? 0.f : top;
  s = s * expf(m - shift) + s2 * expf(m2 - shift);
  m = top;
}

extern "C" __global__ void __launch_bounds__(VOLT_WARPS * 32)
volt_cross_entropy_forward(const volt_x::T* __restrict__ x, const volt_i64* __restrict__ target,
                           float* __restrict__ loss, float* __restrict__ lse_out, volt_i64 rows,
                           volt_i64 ignore_index, float smoothing) {
  const int lane = threadIdx.x & 31;
  const volt_i64 row = (volt_i64)blockIdx.x * VOLT_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  const volt_i64 base = row * VOLT_C;
  float m = -VOLT_INF, s = 0.f;
#if VOLT_SMOOTH
  float total = 0.f;
#endif
  for (volt_i64 start = 0; start < VOLT_C; start += VOLT_TILE) {
    float v[VOLT_UNROLL][VOLT_WIDTH];
    volt_load_tile(x, base, start, lane, -VOLT_INF, v);
    float top = m;
#pragma unroll
    for (int u = 0; u < VOLT_UNROLL; ++u) {
      for (int j = 0; j < VOLT_WIDTH; ++j) top = fmaxf(top, v[u][j]);
    }
    const float shift = top == -VOLT_INF ? 0.f : top;
    float tile = 0.f;
#pragma unroll
    for (int u = 0; u < VOLT_UNROLL; ++u) {
      for (int j = 0; j < VOLT_WIDTH; ++j) {
        tile += expf(v[u][j] - shift);
#if VOLT_SMOOTH
        if (start + (volt_i64)(u * 32 + lane) * VOLT_WIDTH < VOLT_C) total += v[u][j];
#endif
      }
    }
    s = s * expf(m - shift) + tile;
    m = top;
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    volt_merge(m, s, m2, s2);
  }
#if VOLT_SMOOTH
  total = volt_warp_sum(total);
#endif
  if (lane != 0) return;
  const float lse = m + logf(s);
  const volt_i64 t = target[row];
  float out;
  if (t == ignore_index) {
    out = 0.f;
  } else if (t < 0 || t >= VOLT_C) {
    out = __int_as_float(0x7fc00000);  // NaN: no class has this index
  } else {
    out = lse - volt_x::load1(x, base + t);
#if VOLT_SMOOTH
    out = (1.f - smoothing) * out + smoothing * (lse - total / (float)VOLT_C);
#endif
  }
  loss[row] = out;
  lse_out[row] = lse;
}

extern "C" __global__ void __launch_bounds__(VOLT_WARPS * 32)
volt_cross_entropy_backward(const volt_x::T* __restrict__ x, const volt_i64* __restrict__ target,
                            const float* __restrict__ lse_in, const float* __restrict__ grad, volt_i64 grad_stride,
                            volt_x::T* __restrict__ dx, volt_i64 rows, volt_i64 ignore_index, float smoothing) {
  const int lane = threadIdx.x & 31;
  const volt_i64 row = (volt_i64)blockIdx.x * VOLT_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  const volt_i64 base = row * VOLT_C;
  const volt_i64 t = target[row];
  const bool ignored = t == ignore_index;
  float g = ignored ? 0.f : grad[row * grad_stride];
  if (!ignored && (t < 0 || t >= VOLT_C)) g = __int_as_float(0x7fc00000);
  const float lse = lse_in[row];
#if VOLT_SMOOTH
  const float hit = 1.f - smoothing, spread = smoothing / (float)VOLT_C;
#else
  const float hit = 1.f, spread = 0.f;
#endif
  for (volt_i64 start = 0; start < VOLT_C; start += VOLT_TILE) {
    float v[VOLT_UNROLL][VOLT_WIDTH];
    volt_load_tile(x, base, start, lane, 0.f, v);
#pragma unroll
    for (int u = 0; u < VOLT_UNROLL; ++u) {
      const volt_i64 c = start + (volt_i64)(u * 32 + lane) * VOLT_WIDTH;
      if (c >= VOLT_C) continue;
      float out[VOLT_WIDTH];
      for (int j = 0; j < VOLT_WIDTH; ++j) {
        const float p = expf(v[u][j] - lse) - (c + j == t ? hit : 0.f) - spread;
        out[j] = ignored ? 0.f : g * p;
      }
#if VOLT_WIDTH == 4
      volt_x::store(dx, base + c, out);
#else
      volt_x::store1(dx, base + c, out[0]);
#endif
    }
  }
}
)CUDA";
  return source;
}

}  // namespace volt::nn::detail
