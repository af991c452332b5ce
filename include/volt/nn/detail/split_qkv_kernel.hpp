/// \file
/// The backward of volt::nn::functional::split_qkv on CUDA in one kernel compiled at run time
/// (volt/nn/detail/runtime_kernel.hpp): the three head gradients, each (batch, heads, length, head_size) with any
/// strides whose last is 1, gathered into the projection's contiguous (batch, length, 3, heads, head_size) layout.
/// Each thread moves 16 bytes (8 bfloat16 or half values, 4 float32), reading each gradient once and writing the
/// result once; a missing gradient is written as zeros. The kernel moves bytes and never looks at values, so one
/// kernel serves every type. LibTorch's strided copies (one per gradient, through its generic offset calculator)
/// took 0.30 ms of the GPT benchmark's 6.3 ms step on an H100; torch.compile's gather, 0.14 ms. SplitQkvBackward
/// (volt/nn/attention.hpp) uses it wherever split_qkv_unfusable says it can.
#pragma once

#include <volt/core/compat.hpp>
#include <volt/nn/detail/runtime_kernel.hpp>

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>

namespace volt::nn::detail {

/// The (only) variant of the gather kernel.
struct SplitQkvVariant {
  auto key() const { return std::make_tuple(0); }
};

/// The CUDA C source of `volt_split_qkv_backward(q, k, v, out, rows, length, heads, vectors, strides)`: block
/// (x, y), grid (1, rows / y rounded up, at most 65535); `vectors` is head_size's 16-byte pieces; strides in bytes,
/// [q batch, q head, q position, k ..., v ...]; q, k or v null for zeros.
inline std::string split_qkv_source() {
  return R"CUDA(
typedef long long volt_i64;
struct alignas(16) volt_v16 { unsigned w[4]; };

extern "C" __global__ void __launch_bounds__(256)
volt_split_qkv_backward(const char* __restrict__ q, const char* __restrict__ k, const char* __restrict__ v,
                        volt_v16* __restrict__ out, volt_i64 rows, volt_i64 length, int heads, int vectors,
                        volt_i64 qb, volt_i64 qh, volt_i64 ql, volt_i64 kb, volt_i64 kh, volt_i64 kl, volt_i64 vb,
                        volt_i64 vh, volt_i64 vl) {
  const int per_part = heads * vectors;
  const int per_row = 3 * per_part;
  for (volt_i64 row = (volt_i64)blockIdx.y * blockDim.y + threadIdx.y; row < rows;
       row += (volt_i64)gridDim.y * blockDim.y) {
    const volt_i64 b = row / length, l = row - b * length;
    for (int j = threadIdx.x; j < per_row; j += blockDim.x) {
      const int part = j / per_part;
      const int rest = j - part * per_part;
      const int h = rest / vectors;
      const int piece = rest - h * vectors;
      const char* source = part == 0 ? q : (part == 1 ? k : v);
      volt_v16 value = {{0u, 0u, 0u, 0u}};
      if (source != 0) {
        const volt_i64 offset = part == 0 ? b * qb + h * qh + l * ql
                                          : (part == 1 ? b * kb + h * kh + l * kl : b * vb + h * vh + l * vl);
        value = *reinterpret_cast<const volt_v16*>(source + offset + (volt_i64)piece * 16);
      }
      out[row * per_row + j] = value;
    }
  }
}
)CUDA";
}

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
/// The gather kernel, compiled for `device` on first use (null, with the reason in `*why`, when it cannot be).
inline const RuntimeKernel* split_qkv_kernel(int device, std::string* why) {
  return runtime_kernel_pair(SplitQkvVariant{}, device, "volt_split_qkv_backward", "volt_split_qkv_backward",
                             [](const SplitQkvVariant&) { return split_qkv_source(); }, why)
      .forward;
}
#endif

/// Why the gather kernel cannot write the gradient of split_qkv for these head gradients ("" when it can): every
/// defined one a CUDA tensor of `type` on `device` of shape (batch, heads, length, head_size), last stride 1, other
/// strides and data 16-byte aligned; head_size a multiple of 16 bytes; the build has runtime kernels and the kernel
/// compiles.
inline std::string split_qkv_unfusable(const torch::autograd::variable_list& grads, std::int64_t batch,
                                       std::int64_t length, std::int64_t heads, std::int64_t head_size,
                                       c10::ScalarType type, c10::Device device) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  if (!device.is_cuda()) return "not a CUDA tensor";
  if (grads.size() != 3) return "not three gradients";
  const auto element = static_cast<std::int64_t>(c10::elementSize(type));
  if ((head_size * element) % 16 != 0) return "head_size is not a multiple of 16 bytes";
  if (heads * (head_size * element / 16) > (1LL << 30)) return "rows too long";
  for (const auto& g : grads) {
    if (!g.defined()) continue;
    if (g.device() != device || g.scalar_type() != type) return "a gradient of another device or type";
    if (g.dim() != 4 || g.size(0) != batch || g.size(1) != heads || g.size(2) != length || g.size(3) != head_size) {
      return "a gradient of another shape";
    }
    if (g.stride(3) != 1 && head_size > 1) return "a gradient whose last dimension is strided";
    for (int d = 0; d < 3; ++d) {
      if ((g.stride(d) * element) % 16 != 0) return "a gradient whose strides are not 16-byte aligned";
    }
    if (reinterpret_cast<std::uintptr_t>(g.data_ptr()) % 16 != 0) return "a gradient not 16-byte aligned";
  }
  std::string why;
  if (split_qkv_kernel(device.index(), &why) == nullptr) return why;
  return "";
#else
  (void)grads, (void)batch, (void)length, (void)heads, (void)head_size, (void)type, (void)device;
  return "this build has no runtime CUDA kernels (VOLT_DETAIL_HAS_RUNTIME_KERNELS: a CUDA LibTorch on Linux)";
#endif
}

/// The projection's gradient (batch, length, 3 * heads * head_size) from the three head gradients, by the kernel;
/// call only where split_qkv_unfusable(...) is "".
inline torch::Tensor split_qkv_gather(const torch::autograd::variable_list& grads, std::int64_t batch,
                                      std::int64_t length, std::int64_t heads, std::int64_t head_size,
                                      c10::ScalarType type, c10::Device device) {
#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
  c10::cuda::CUDAGuard guard(device);
  const auto kernel = split_qkv_kernel(device.index(), nullptr);
  TORCH_CHECK(kernel != nullptr, "volt::nn: the split_qkv gather kernel is not available");
  auto out = torch::empty({batch, length, 3 * heads * head_size}, torch::TensorOptions().dtype(type).device(device));
  if (out.numel() == 0) return out;
  const auto element = static_cast<long long>(c10::elementSize(type));
  const void* pointers[3] = {nullptr, nullptr, nullptr};
  long long strides[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    const auto& g = grads[static_cast<std::size_t>(i)];
    if (!g.defined()) continue;
    pointers[i] = g.data_ptr();
    strides[3 * i] = g.stride(0) * element;      // batch
    strides[3 * i + 1] = g.stride(1) * element;  // head
    strides[3 * i + 2] = g.stride(2) * element;  // position
  }
  void* out_ptr = out.data_ptr();
  long long rows = batch * length, length_arg = length;
  int heads_arg = static_cast<int>(heads), vectors = static_cast<int>(head_size * element / 16);
  const long long per_row = 3LL * heads * vectors;
  // One warp-multiple of threads across a row (at most 256), as many rows per block as fit in 256 threads.
  const unsigned block_x = static_cast<unsigned>(std::min<long long>(256, (per_row + 31) / 32 * 32));
  const unsigned block_y = std::max(1u, 256u / block_x);
  const unsigned grid_y = static_cast<unsigned>(std::min<long long>(65535, (rows + block_y - 1) / block_y));
  void* arguments[] = {&pointers[0], &pointers[1], &pointers[2], &out_ptr,     &rows,       &length_arg,
                       &heads_arg,   &vectors,     &strides[0],  &strides[1],  &strides[2], &strides[3],
                       &strides[4],  &strides[5],  &strides[6],  &strides[7],  &strides[8]};
  kernel->launch_2d(1, grid_y, block_x, block_y, 0, arguments);
  return out;
#else
  (void)grads, (void)batch, (void)length, (void)heads, (void)head_size, (void)type, (void)device;
  TORCH_CHECK(false, "volt::nn: this build has no runtime CUDA kernels");
#endif
}

}  // namespace volt::nn::detail
