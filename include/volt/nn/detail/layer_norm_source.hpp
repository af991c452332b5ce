/// \file
/// The CUDA C source of volt::nn::LayerNorm's kernels (compiled at run time by volt/nn/detail/layer_norm_kernels.hpp),
/// generated per row length and tensor types. Plain strings: no CUDA header is needed to build it, and the sources
/// can be compiled with NVRTC on a machine without a GPU (the tests do).
///
/// Forward: one warp per row of `n` values held in registers (so the variance is the two-pass one, from values
/// already loaded), 4-wide vector loads and stores, the row's mean and 1/sqrt(var + eps) saved in float32 for the
/// backward. Backward: each warp walks rows, computes
///   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),  g = dy * weight,  xhat = (x - mean) * rstd
/// and keeps its columns' sums of dy * xhat (the weight's gradient) and dy (the bias's) in registers; the block adds
/// its warps' sums in a fixed order into one row of a float32 partial-sum tensor, which LibTorch's sum reduces.
/// Nothing uses atomics, so results are the same from run to run. Arithmetic is in float32 for every input type,
/// as LibTorch's layer norm does; the input, output, weight and gradient types may all differ (float, bfloat16,
/// half), which is what lets a bfloat16 output leave the kernel directly under autocast.
#pragma once

#include <volt/nn/detail/kernel_source_common.hpp>

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <tuple>

namespace volt::nn::detail {

/// The longest row the fused kernels take (a warp holds a row in registers) and the row-length multiple they
/// need (4-wide vector loads).
inline constexpr std::int64_t layer_norm_max_row = 1024;
inline constexpr std::int64_t layer_norm_row_multiple = 4;

/// What one compiled variant is for: row length, the type codes of x, the output (forward) or dy (backward), the
/// weight and bias, and which of weight and bias exist; with `residual`, the variant that normalizes h = x + r and
/// writes h too: the type codes of r and of h (the promoted type of x and r).
struct LayerNormVariant {
  std::int64_t n = 0;
  int x_type = 0, y_type = 0, w_type = 0;
  bool has_weight = false, has_bias = false;
  bool residual = false;
  int r_type = 0, h_type = 0;
  auto key() const {
    return std::make_tuple(n, x_type, y_type, w_type, has_weight, has_bias, residual, r_type, h_type);
  }
};

/// The variant for layer_norm(x) over its last `n` values with this weight and bias (either may be undefined; when
/// both are defined they have one type) and output type; with a defined `residual`, for layer_norm(x + residual).
template <typename Tensor>
LayerNormVariant layer_norm_variant(const Tensor& x, std::int64_t n, const Tensor& weight, const Tensor& bias,
                                    c10::ScalarType output_type, const Tensor& residual = Tensor()) {
  LayerNormVariant variant;
  variant.n = n;
  variant.x_type = kernel_type_code(x.scalar_type());
  variant.y_type = kernel_type_code(output_type);
  const auto& parameter = weight.defined() ? weight : bias;
  variant.w_type = parameter.defined() ? kernel_type_code(parameter.scalar_type()) : 0;
  variant.has_weight = weight.defined();
  variant.has_bias = bias.defined();
  variant.residual = residual.defined();
  variant.r_type = residual.defined() ? kernel_type_code(residual.scalar_type()) : variant.x_type;
  variant.h_type = residual.defined() ? kernel_type_code(c10::promoteTypes(x.scalar_type(), residual.scalar_type()))
                                      : variant.x_type;
  return variant;
}

/// The CUDA C source of both kernels for one variant (no headers: NVRTC compiles it as it is). `forward`'s
/// arguments: x, r, weight, bias, h, y, mean, rstd, rows, eps; `backward`'s: dy, x (the normalized input: h with a
/// residual), weight, mean, rstd, dh, dx, dr, partial, rows, where partial is float32 [gridDim.x, 2, n] (the block's
/// sums of dy * xhat, then of dy). Without `residual`, r, h, dh and dr are unused (pass null). With it, the forward
/// writes h = x + r rounded to h's type and normalizes that; the backward adds dh (h's gradient from its other
/// uses; may be null) to the layer norm's input gradient and writes the sum as dx (x's type) and, when dr is not
/// null, as dr (r's type).
inline std::string layer_norm_source(const LayerNormVariant& v) {
  const std::int64_t iterations = (v.n / 4 + 31) / 32;
  std::string source = "#define VOLT_N " + std::to_string(v.n) + "\n#define VOLT_ITER " +
                       std::to_string(iterations) + "\n#define VOLT_X " + std::to_string(v.x_type) +
                       "\n#define VOLT_Y " + std::to_string(v.y_type) + "\n#define VOLT_W " +
                       std::to_string(v.w_type) + "\n#define VOLT_HAS_W " + std::to_string(v.has_weight ? 1 : 0) +
                       "\n#define VOLT_HAS_B " + std::to_string(v.has_bias ? 1 : 0) +
                       "\n#define VOLT_RESIDUAL " + std::to_string(v.residual ? 1 : 0) + "\n#define VOLT_R " +
                       std::to_string(v.r_type) + "\n#define VOLT_H " + std::to_string(v.h_type) + "\n";
  source += R"CUDA(
#define VOLT_WARPS 8
)CUDA" + kernel_value_io_source() + R"CUDA(
typedef volt_io<VOLT_X> volt_x;
typedef volt_io<VOLT_Y> volt_y;
typedef volt_io<VOLT_W> volt_w;
typedef volt_io<VOLT_R> volt_r;
typedef volt_io<VOLT_H> volt_h;  // the normalized input's type: x's, or h's with a residual

// Column of lane `lane` in iteration `it` (4 consecutive columns from there).
__forceinline__ int volt_column(int it, int lane) { return (it * 32 + lane) * 4; }

extern "C" __global__ void __launch_bounds__(VOLT_WARPS * 32)
volt_layer_norm_forward(const volt_x::T* __restrict__ x, const volt_r::T* __restrict__ r,
                        const volt_w::T* __restrict__ weight, const volt_w::T* __restrict__ bias,
                        volt_h::T* __restrict__ h, volt_y::T* __restrict__ y, float* __restrict__ mean_out,
                        float* __restrict__ rstd_out, volt_i64 rows, float eps) {
  const int lane = threadIdx.x & 31;
  const volt_i64 row = (volt_i64)blockIdx.x * VOLT_WARPS + (threadIdx.x >> 5);
  if (row >= rows) return;
  const volt_i64 base = row * VOLT_N;
  float v[VOLT_ITER][4];
  float sum = 0.f;
#pragma unroll
  for (int it = 0; it < VOLT_ITER; ++it) {
    const int c = volt_column(it, lane);
    if (c < VOLT_N) {
      volt_x::load(x, base + c, v[it]);
#if VOLT_RESIDUAL
      float rv[4];
      volt_r::load(r, base + c, rv);
      for (int j = 0; j < 4; ++j) v[it][j] = volt_h::round(v[it][j] + rv[j]);
      volt_h::store(h, base + c, v[it]);
#endif
      sum += (v[it][0] + v[it][1]) + (v[it][2] + v[it][3]);
    }
  }
  const float mean = volt_warp_sum(sum) / VOLT_N;
  float squares = 0.f;
#pragma unroll
  for (int it = 0; it < VOLT_ITER; ++it) {
    if (volt_column(it, lane) < VOLT_N) {
      for (int j = 0; j < 4; ++j) {
        const float d = v[it][j] - mean;
        squares += d * d;
      }
    }
  }
  const float rstd = rsqrtf(volt_warp_sum(squares) / VOLT_N + eps);
#pragma unroll
  for (int it = 0; it < VOLT_ITER; ++it) {
    const int c = volt_column(it, lane);
    if (c < VOLT_N) {
      float w[4] = {1.f, 1.f, 1.f, 1.f}, b[4] = {0.f, 0.f, 0.f, 0.f}, out[4];
      if (VOLT_HAS_W) volt_w::load(weight, c, w);
      if (VOLT_HAS_B) volt_w::load(bias, c, b);
      for (int j = 0; j < 4; ++j) out[j] = (v[it][j] - mean) * rstd * w[j] + b[j];
      volt_y::store(y, base + c, out);
    }
  }
  if (lane == 0) {
    mean_out[row] = mean;
    rstd_out[row] = rstd;
  }
}

// dy has the output's type code (VOLT_Y), x and dh the normalized input's (VOLT_H), dx the input's (VOLT_X), dr
// the residual's (VOLT_R).
extern "C" __global__ void __launch_bounds__(VOLT_WARPS * 32)
volt_layer_norm_backward(const volt_y::T* __restrict__ dy, const volt_h::T* __restrict__ x,
                         const volt_w::T* __restrict__ weight, const float* __restrict__ mean,
                         const float* __restrict__ rstd, const volt_h::T* __restrict__ dh,
                         volt_x::T* __restrict__ dx, volt_r::T* __restrict__ dr, float* __restrict__ partial,
                         volt_i64 rows) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float w[VOLT_ITER][4], dw[VOLT_ITER][4], db[VOLT_ITER][4];
#pragma unroll
  for (int it = 0; it < VOLT_ITER; ++it) {
    for (int j = 0; j < 4; ++j) w[it][j] = 1.f, dw[it][j] = 0.f, db[it][j] = 0.f;
    if (VOLT_HAS_W && volt_column(it, lane) < VOLT_N) volt_w::load(weight, volt_column(it, lane), w[it]);
  }
  for (volt_i64 row = (volt_i64)blockIdx.x * VOLT_WARPS + warp; row < rows; row += (volt_i64)gridDim.x * VOLT_WARPS) {
    const volt_i64 base = row * VOLT_N;
    const float mu = mean[row], rs = rstd[row];
    float xhat[VOLT_ITER][4], g[VOLT_ITER][4];
    float sum_g = 0.f, sum_gx = 0.f;
#pragma unroll
    for (int it = 0; it < VOLT_ITER; ++it) {
      const int c = volt_column(it, lane);
      if (c < VOLT_N) {
        float xv[4], dyv[4];
        volt_h::load(x, base + c, xv);
        volt_y::load(dy, base + c, dyv);
        for (int j = 0; j < 4; ++j) {
          xhat[it][j] = (xv[j] - mu) * rs;
          dw[it][j] += dyv[j] * xhat[it][j];
          db[it][j] += dyv[j];
          g[it][j] = dyv[j] * w[it][j];
          sum_g += g[it][j];
          sum_gx += g[it][j] * xhat[it][j];
        }
      }
    }
    const float mean_g = volt_warp_sum(sum_g) / VOLT_N, mean_gx = volt_warp_sum(sum_gx) / VOLT_N;
#pragma unroll
    for (int it = 0; it < VOLT_ITER; ++it) {
      const int c = volt_column(it, lane);
      if (c < VOLT_N) {
        float out[4];
        for (int j = 0; j < 4; ++j) out[j] = rs * (g[it][j] - mean_g - xhat[it][j] * mean_gx);
#if VOLT_RESIDUAL
        if (dh != nullptr) {
          float extra[4];
          volt_h::load(dh, base + c, extra);
          for (int j = 0; j < 4; ++j) out[j] += extra[j];
        }
        if (dr != nullptr) volt_r::store(dr, base + c, out);
#endif
        volt_x::store(dx, base + c, out);
      }
    }
  }
#if VOLT_HAS_W || VOLT_HAS_B
  // The block's sums, warp by warp in a fixed order: the weight's gradient (part 0), then the bias's (part 1).
  __shared__ float sums[VOLT_WARPS * VOLT_N];
  for (int part = 0; part < 2; ++part) {
    if ((part == 0 && !VOLT_HAS_W) || (part == 1 && !VOLT_HAS_B)) continue;
#pragma unroll
    for (int it = 0; it < VOLT_ITER; ++it) {
      const int c = volt_column(it, lane);
      if (c < VOLT_N) {
        for (int j = 0; j < 4; ++j) sums[warp * VOLT_N + c + j] = part == 0 ? dw[it][j] : db[it][j];
      }
    }
    __syncthreads();
    for (int c = threadIdx.x; c < VOLT_N; c += VOLT_WARPS * 32) {
      float s = 0.f;
      for (int k = 0; k < VOLT_WARPS; ++k) s += sums[k * VOLT_N + c];
      partial[((volt_i64)blockIdx.x * 2 + part) * VOLT_N + c] = s;
    }
    __syncthreads();
  }
#endif
}
)CUDA";
  return source;
}

}  // namespace volt::nn::detail
