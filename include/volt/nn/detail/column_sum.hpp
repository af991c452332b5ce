/// \file
/// The sum over the rows of a (rows, columns) CUDA tensor, per column, accumulated in float32: the bias gradient of a
/// linear layer (volt::nn::Linear). Two kernels compiled at run time (volt/nn/detail/runtime_kernel.hpp) per element
/// and result type. `volt_column_sum`: each thread adds 4 adjacent columns down a stretch of rows (a warp reads 128
/// adjacent columns of a row at once), the block's 8 row groups are added in shared memory in a fixed order, and
/// each block writes one row of float32 partial sums. `volt_column_total` adds those rows up per column (32 row
/// groups per column, then in shared memory) and writes the result in its own type. LibTorch's own `sum(0)` over a
/// bias gradient ran at about a third of the memory bandwidth on an H100 (24 bias gradients of the GPT benchmark:
/// 0.72 ms of a 7.3 ms step); volt_column_sum took 0.29 ms for the same 24 on an H100. LibTorch's sum of the small
/// float32 partials cost 5-12 us a call (0.13 ms for those 24, 0.16 ms for the layer norms' 13); volt_column_total
/// replaces it in column_sum and in volt::nn::LayerNorm's backward. No atomics: the same bits from run to run.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/kernel_source_common.hpp>
#include <volt/nn/detail/runtime_kernel.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>

namespace volt::nn::detail {

/// The variant of the column-sum kernels: the summed tensor's and the result's type codes (kernel_type_code).
struct ColumnSumVariant {
  int x_type = 0;
  int out_type = 0;
  auto key() const { return std::make_tuple(x_type, out_type); }
};

/// The CUDA C source of `volt_column_sum(x, partial, rows, columns, rows_per_block)` for one element type: block
/// (32, 8), grid (columns / 128 rounded up, row stretches); partial is float32 [gridDim.y, columns]. Needs columns
/// a multiple of 4 and x aligned for 4-value loads. And of `volt_column_total(partial, out, rows, columns)`: block
/// (32, 32), grid columns / 32 rounded up; any float32 (rows, columns) partial, contiguous, into out[columns].
inline std::string column_sum_source(const ColumnSumVariant& v) {
  return "#define VOLT_X " + std::to_string(v.x_type) + "\n#define VOLT_OUT " + std::to_string(v.out_type) + "\n" +
         kernel_value_io_source() + R"CUDA(
typedef volt_io<VOLT_X> volt_x;
typedef volt_io<VOLT_OUT> volt_out;

extern "C" __global__ void __launch_bounds__(1024)
volt_column_total(const float* __restrict__ partial, volt_out::T* __restrict__ out, volt_i64 rows,
                  volt_i64 columns) {
  __shared__ float sums[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const volt_i64 c = (volt_i64)blockIdx.x * 32 + tx;
  float acc = 0.f;
  if (c < columns) {
    volt_i64 r = ty;
    for (; r + 96 < rows; r += 128) {  // four rows in flight per thread
      const float a = partial[r * columns + c], b = partial[(r + 32) * columns + c];
      const float d = partial[(r + 64) * columns + c], e = partial[(r + 96) * columns + c];
      acc += a;
      acc += b;
      acc += d;
      acc += e;
    }
    for (; r < rows; r += 32) acc += partial[r * columns + c];
  }
  sums[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && c < columns) {
    float total = 0.f;
    for (int k = 0; k < 32; ++k) total += sums[k][tx];
    volt_out::store1(out, c, total);
  }
}

extern "C" __global__ void __launch_bounds__(256)
volt_column_sum(const volt_x::T* __restrict__ x, float* __restrict__ partial, volt_i64 rows, volt_i64 columns,
                volt_i64 rows_per_block) {
  __shared__ float sums[8][32][4];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const volt_i64 c = ((volt_i64)blockIdx.x * 32 + tx) * 4;
  const volt_i64 first = (volt_i64)blockIdx.y * rows_per_block;
  const volt_i64 last = first + rows_per_block < rows ? first + rows_per_block : rows;
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (c < columns) {
    volt_i64 r = first + ty;
    // Four rows in flight per thread, then the rest one by one.
    for (; r + 24 < last; r += 32) {
      float v[4][4];
#pragma unroll
      for (int u = 0; u < 4; ++u) volt_x::load(x, (r + 8 * u) * columns + c, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        for (int j = 0; j < 4; ++j) acc[j] += v[u][j];
      }
    }
    for (; r < last; r += 8) {
      float v[4];
      volt_x::load(x, r * columns + c, v);
      for (int j = 0; j < 4; ++j) acc[j] += v[j];
    }
  }
  for (int j = 0; j < 4; ++j) sums[ty][tx][j] = acc[j];
  __syncthreads();
  if (ty == 0 && c < columns) {
    float total[4] = {0.f, 0.f, 0.f, 0.f};
    for (int k = 0; k < 8; ++k) {
      for (int j = 0; j < 4; ++j) total[j] += sums[k][tx][j];
    }
    for (int j = 0; j < 4; ++j) partial[(volt_i64)blockIdx.y * columns + c + j] = total[j];
  }
}
)CUDA";
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
/// The pair (volt_column_sum, volt_column_total) of a variant, compiled for `device` on first use.
inline RuntimeKernelPair column_sum_kernels(const ColumnSumVariant& variant, int device, std::string* why) {
  return runtime_kernel_pair(variant, device, "volt_column_sum", "volt_column_total",
                             [](const ColumnSumVariant& v) { return column_sum_source(v); }, why);
}

/// The per-column sum of a contiguous float32 (rows, columns) CUDA tensor of partial sums, in `out_type` (float,
/// bfloat16 or half): volt_column_total, or LibTorch's sum where that kernel is unavailable.
inline torch::Tensor column_total(const torch::Tensor& partial, c10::ScalarType out_type) {
  TORCH_CHECK(partial.dim() == 2 && partial.is_contiguous() && partial.scalar_type() == torch::kFloat,
              "volt::nn: column_total takes a contiguous float32 (rows, columns) tensor, got ", partial.sizes());
  const int out_code = kernel_type_code(out_type);
  const auto kernels = out_code < 0 || partial.numel() == 0
                           ? RuntimeKernelPair{}
                           : column_sum_kernels(ColumnSumVariant{0, out_code}, partial.get_device(), nullptr);
  if (kernels.backward == nullptr) return partial.sum(0).to(out_type);
  c10::cuda::CUDAGuard guard(partial.device());
  auto out = torch::empty({partial.size(1)}, partial.options().dtype(out_type));
  long long rows = partial.size(0), columns = partial.size(1);
  const void* partial_ptr = partial.data_ptr();
  void* out_ptr = out.data_ptr();
  void* arguments[] = {&partial_ptr, &out_ptr, &rows, &columns};
  kernels.backward->launch_2d(static_cast<unsigned>((columns + 31) / 32), 1, 32, 32, 0, arguments);
  return out;
}
#endif

/// Why column_sum(x) cannot run its kernel ("" when it can): x is a contiguous 2-D CUDA tensor of float, bfloat16 or
/// half with columns a multiple of 4, aligned for 16-byte loads, the build has runtime kernels and the kernel
/// compiles.
inline std::string column_sum_unfusable(const torch::Tensor& x) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  if (!x.defined() || !x.is_cuda()) return "not a CUDA tensor";
  if (kernel_type_code(x.scalar_type()) < 0) return "not float, bfloat16 or half";
  if (x.dim() != 2 || !x.is_contiguous() || x.size(1) % 4 != 0 || x.numel() == 0) {
    return "not a contiguous (rows, columns) tensor with columns a multiple of 4";
  }
  if (reinterpret_cast<std::uintptr_t>(x.data_ptr()) % 16 != 0) return "data not 16-byte aligned";
  std::string why;
  if (column_sum_kernels(ColumnSumVariant{kernel_type_code(x.scalar_type()), 0}, x.get_device(), &why).forward ==
      nullptr) {
    return why;
  }
  return "";
#else
  (void)x;
  return "this build has no runtime CUDA kernels (VOLT_DETAIL_HAS_RUNTIME_KERNELS: a CUDA LibTorch on Linux)";
#endif
}

/// The float32 sum of x's rows per column, converted to `out_type`; call only where column_sum_unfusable(x) is "".
inline torch::Tensor column_sum(const torch::Tensor& x, c10::ScalarType out_type) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  c10::cuda::CUDAGuard guard(x.device());
  const int device = x.get_device();
  const ColumnSumVariant variant{kernel_type_code(x.scalar_type()), 0};
  const auto kernel = column_sum_kernels(variant, device, nullptr).forward;
  TORCH_CHECK(kernel != nullptr, "volt::nn: the column-sum kernel is not available");
  long long rows = x.size(0), columns = x.size(1);
  const long long grid_x = (columns + 127) / 128;
  // About four blocks per multiprocessor, each with at least 32 rows.
  const long long wanted = std::max<long long>(1, 4LL * multiprocessor_count(device) / grid_x);
  const long long grid_y = std::max<long long>(1, std::min<long long>(wanted, (rows + 31) / 32));
  long long rows_per_block = (rows + grid_y - 1) / grid_y;
  auto partial = torch::empty({grid_y, columns}, x.options().dtype(torch::kFloat));
  const void* x_ptr = x.data_ptr();
  void* partial_ptr = partial.data_ptr();
  void* arguments[] = {&x_ptr, &partial_ptr, &rows, &columns, &rows_per_block};
  kernel->launch_2d(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y), 32, 8, 0, arguments);
  if (grid_y == 1 && out_type == torch::kFloat) return partial.squeeze(0);
  return column_total(partial, out_type);
#else
  (void)x, (void)out_type;
  TORCH_CHECK(false, "volt::nn: this build has no runtime CUDA kernels");
#endif
}

}  // namespace volt::nn::detail
