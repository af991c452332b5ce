/// \file
/// The backward of gelu(linear(x, W, b)) up to the matmul, on CUDA in one kernel compiled at run time
/// (volt/nn/detail/runtime_kernel.hpp): from the output's gradient `dh` and the saved pre-activation `z`, it writes
/// dz = dh * gelu'(z) (rounded to z's type, as LibTorch's GeluBackward does) and, in the same pass, float32 partial
/// sums of dz per column for the bias gradient, which volt_column_total (column_sum.hpp) adds up. Unfused, the bias
/// gradient reads dz back from memory: for the GPT benchmark's fc1 layers (16384 x 1536 bfloat16) that is 50 MB a
/// layer, about 0.02 ms of an H100's time each, and the activation's backward and the sum are two launches. Exact
/// GELU (erf) and its tanh approximation, as torch::gelu's `approximate` ("none", "tanh"). No atomics: the same bits
/// from run to run.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/column_sum.hpp>
#include <volt/nn/detail/kernel_source_common.hpp>
#include <volt/nn/detail/runtime_kernel.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>

namespace volt::nn::detail {

/// The variant of the GELU-and-bias backward kernel: the tensors' type code (kernel_type_code) and the approximation.
struct GeluBiasVariant {
  int type = 0;
  bool tanh = false;
  auto key() const { return std::make_tuple(type, tanh); }
};

/// The CUDA C source of `volt_gelu_bias_backward(dh, z, dz, partial, rows, vectors, rows_per_block)`: block (32, 8),
/// grid (vectors / 32 rounded up, row stretches), where `vectors` is a row's number of 16-byte pieces; each thread
/// takes one 16-byte piece of columns (4 float or 8 bfloat16 / half values) down every eighth row of its block's
/// stretch; partial is float32 [gridDim.y, columns]. Needs rows of whole 16-byte pieces and 16-byte aligned data.
inline std::string gelu_bias_source(const GeluBiasVariant& v) {
  return "#define VOLT_T " + std::to_string(v.type) + "\n#define VOLT_TANH " + std::to_string(v.tanh ? 1 : 0) + "\n" +
         kernel_value_io_source() + R"CUDA(
typedef volt_io<VOLT_T> volt_t;

// d gelu(z) / dz in float: z * Phi(z) exactly, or 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))).
__forceinline__ float volt_gelu_slope(float z) {
#if VOLT_TANH
  const float beta = 0.7978845608028654f, kappa = 0.044715f;
  const float z2 = z * z;
  const float t = tanhf(beta * (z + kappa * z2 * z));
  const float outer = 0.5f * (1.f + t);
  const float inner = 0.5f * z * ((1.f - t * t) * (beta * (1.f + 3.f * kappa * z2)));
  return outer + inner;
#else
  const float cdf = 0.5f * (1.f + erff(z * 0.7071067811865476f));
  const float pdf = expf(-0.5f * z * z) * 0.3989422804014327f;
  return cdf + z * pdf;
#endif
}

// 16 bytes of the tensors' type: 4 float or 8 bfloat16 / half values.
#define VOLT_VEC (VOLT_T == 0 ? 4 : 8)
struct alignas(16) volt_raw { unsigned w[4]; };

// Lane j of a 16-byte vector, as float.
__forceinline__ float volt_lane(const volt_raw& q, int j) {
#if VOLT_T == 0
  return __uint_as_float(q.w[j]);
#else
  return volt_t::to_float((j & 1) ? (q.w[j >> 1] >> 16) : (q.w[j >> 1] & 0xffffu));
#endif
}

// dz for each lane of (g, v) = (dh, z) into `out`, rounded to the type, and the rounded values added to acc.
__forceinline__ void volt_gelu_vector(const volt_raw& g, const volt_raw& v, volt_raw& out, float acc[VOLT_VEC]) {
#pragma unroll
  for (int j = 0; j < VOLT_VEC; ++j) {
    const float d = volt_lane(g, j) * volt_gelu_slope(volt_lane(v, j));
#if VOLT_T == 0
    out.w[j] = __float_as_uint(d);
    acc[j] += d;
#else
    const unsigned bits = volt_t::from_float(d);
    acc[j] += volt_t::to_float(bits);
    if (j & 1) {
      out.w[j >> 1] |= bits << 16;
    } else {
      out.w[j >> 1] = bits;
    }
#endif
  }
}

extern "C" __global__ void __launch_bounds__(256)
volt_gelu_bias_backward(const volt_raw* __restrict__ dh, const volt_raw* __restrict__ z, volt_raw* __restrict__ dz,
                        float* __restrict__ partial, volt_i64 rows, volt_i64 vectors, volt_i64 rows_per_block) {
  __shared__ float sums[8][32][VOLT_VEC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const volt_i64 c = (volt_i64)blockIdx.x * 32 + tx;  // which 16-byte vector of the row
  const volt_i64 first = (volt_i64)blockIdx.y * rows_per_block;
  const volt_i64 last = first + rows_per_block < rows ? first + rows_per_block : rows;
  float acc[VOLT_VEC];
#pragma unroll
  for (int j = 0; j < VOLT_VEC; ++j) acc[j] = 0.f;
  if (c < vectors) {
    volt_i64 r = first + ty;
    // Four rows in flight per thread (8 loads of 16 bytes), then the rest one by one.
    for (; r + 24 < last; r += 32) {
      volt_raw g[4], v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        g[u] = dh[(r + 8 * u) * vectors + c];
        v[u] = z[(r + 8 * u) * vectors + c];
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        volt_raw out;
        volt_gelu_vector(g[u], v[u], out, acc);
        dz[(r + 8 * u) * vectors + c] = out;
      }
    }
    for (; r < last; r += 8) {
      volt_raw out;
      volt_gelu_vector(dh[r * vectors + c], z[r * vectors + c], out, acc);
      dz[r * vectors + c] = out;
    }
  }
#pragma unroll
  for (int j = 0; j < VOLT_VEC; ++j) sums[ty][tx][j] = acc[j];
  __syncthreads();
  if (ty == 0 && c < vectors) {
    const volt_i64 columns = vectors * VOLT_VEC;
    for (int j = 0; j < VOLT_VEC; ++j) {
      float total = 0.f;
      for (int k = 0; k < 8; ++k) total += sums[k][tx][j];
      partial[(volt_i64)blockIdx.y * columns + c * VOLT_VEC + j] = total;
    }
  }
}
)CUDA";
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
/// The kernel of a variant, compiled for `device` on first use (null, with the reason in `*why`, when it cannot be).
inline const RuntimeKernel* gelu_bias_kernel(const GeluBiasVariant& variant, int device, std::string* why) {
  return runtime_kernel_pair(variant, device, "volt_gelu_bias_backward", "volt_gelu_bias_backward",
                             [](const GeluBiasVariant& v) { return gelu_bias_source(v); }, why)
      .forward;
}
#endif

/// Why gelu_bias_backward(dh, z, ...) cannot run its kernel ("" when it can): dh and z are contiguous 2-D CUDA
/// tensors of one shape (rows, columns), rows of whole 16-byte pieces (columns a multiple of 4 float or 8 bfloat16 /
/// half values), of one type (float, bfloat16 or half), on one
/// device, 16-byte aligned, not empty; the build has runtime kernels and the kernel compiles.
inline std::string gelu_bias_unfusable(const torch::Tensor& dh, const torch::Tensor& z, bool tanh) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  if (!dh.defined() || !z.defined() || !dh.is_cuda() || !z.is_cuda()) return "not CUDA tensors";
  if (dh.device() != z.device()) return "the gradient and the saved input are on different devices";
  if (dh.scalar_type() != z.scalar_type() || kernel_type_code(z.scalar_type()) < 0) {
    return "the gradient and the saved input are not of one type among float, bfloat16 and half";
  }
  const auto per_vector = static_cast<std::int64_t>(16 / c10::elementSize(z.scalar_type()));
  if (z.dim() != 2 || dh.sizes() != z.sizes() || !z.is_contiguous() || !dh.is_contiguous() ||
      z.size(1) % per_vector != 0 || z.numel() == 0) {
    return "not contiguous (rows, columns) tensors of one shape with rows of whole 16-byte pieces";
  }
  if (reinterpret_cast<std::uintptr_t>(dh.data_ptr()) % 16 != 0 ||
      reinterpret_cast<std::uintptr_t>(z.data_ptr()) % 16 != 0) {
    return "data not 16-byte aligned";
  }
  std::string why;
  if (gelu_bias_kernel(GeluBiasVariant{kernel_type_code(z.scalar_type()), tanh}, z.get_device(), &why) == nullptr) {
    return why;
  }
  return "";
#else
  (void)dh, (void)z, (void)tanh;
  return "this build has no runtime CUDA kernels (VOLT_DETAIL_HAS_RUNTIME_KERNELS: a CUDA LibTorch on Linux)";
#endif
}

/// {dz, the column sums of dz in `bias_type`} for dz = dh * gelu'(z) in z's type; call only where
/// gelu_bias_unfusable(dh, z, tanh) is "".
inline std::pair<torch::Tensor, torch::Tensor> gelu_bias_backward(const torch::Tensor& dh, const torch::Tensor& z,
                                                                  bool tanh, c10::ScalarType bias_type) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  c10::cuda::CUDAGuard guard(z.device());
  const int device = z.get_device();
  const auto kernel = gelu_bias_kernel(GeluBiasVariant{kernel_type_code(z.scalar_type()), tanh}, device, nullptr);
  TORCH_CHECK(kernel != nullptr, "volt::nn: the GELU-and-bias backward kernel is not available");
  const long long columns = z.size(1);
  long long rows = z.size(0), vectors = columns * static_cast<long long>(c10::elementSize(z.scalar_type())) / 16;
  const long long grid_x = (vectors + 31) / 32;
  // About eight blocks per multiprocessor, each with at least 32 rows.
  const long long wanted = std::max<long long>(1, 8LL * multiprocessor_count(device) / grid_x);
  const long long grid_y = std::max<long long>(1, std::min<long long>(wanted, (rows + 31) / 32));
  long long rows_per_block = (rows + grid_y - 1) / grid_y;
  auto dz = torch::empty_like(z);
  auto partial = torch::empty({grid_y, columns}, z.options().dtype(torch::kFloat));
  const void* dh_ptr = dh.data_ptr();
  const void* z_ptr = z.data_ptr();
  void* dz_ptr = dz.data_ptr();
  void* partial_ptr = partial.data_ptr();
  void* arguments[] = {&dh_ptr, &z_ptr, &dz_ptr, &partial_ptr, &rows, &vectors, &rows_per_block};
  kernel->launch_2d(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 32, 8, 0, arguments);
  if (grid_y == 1 && bias_type == torch::kFloat) return {dz, partial.squeeze(0)};
  return {dz, column_total(partial, bias_type)};
#else
  (void)dh, (void)z, (void)tanh, (void)bias_type;
  TORCH_CHECK(false, "volt::nn: this build has no runtime CUDA kernels");
#endif
}

}  // namespace volt::nn::detail
