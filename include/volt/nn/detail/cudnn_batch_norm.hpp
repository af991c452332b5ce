/// \file
/// The fused path of volt::nn's batch-norm modules: cuDNN's NHWC training kernels that compute
/// `relu(batch_norm(x))` or `relu(batch_norm(x) + z)` in one pass forward and one pass backward
/// (`cudnnBatchNormalizationForwardTrainingEx` / `cudnnBatchNormalizationBackwardEx` with
/// `CUDNN_BATCHNORM_OPS_BN_ACTIVATION` or `CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION`, mode
/// `CUDNN_BATCHNORM_SPATIAL_PERSISTENT`), with its own autograd node.
///
/// Compiled where VOLT_DETAIL_HAS_CUDNN is defined (volt/core/compat.hpp: a CUDA LibTorch and cudnn.h on the
/// include path; volt's CMake adds the cuDNN headers of PyPI's nvidia-cudnn package next to torch). cuDNN's
/// functions are looked up at run time in the libcudnn that LibTorch has loaded, so a program links nothing more.
/// Elsewhere `available()` is false and the modules run LibTorch's separate ops.
#pragma once

#include <volt/core/compat.hpp>

#include <torch/torch.h>

#include <cstdint>
#include <string>

#if defined(VOLT_DETAIL_HAS_CUDNN)
#include <ATen/cudnn/Handle.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <c10/cuda/CUDAStream.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <array>
#include <mutex>
#include <tuple>
#include <vector>
#endif

namespace volt::nn::detail {

#if defined(VOLT_DETAIL_HAS_CUDNN)

/// The cuDNN functions the fused path calls, found in the process's libcudnn (loaded by LibTorch).
struct CudnnBatchNormApi {
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnCreateTensorDescriptor) create_tensor = nullptr;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor = nullptr;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor_4d = nullptr;
  decltype(&cudnnDeriveBNTensorDescriptor) derive_bn = nullptr;
  decltype(&cudnnCreateActivationDescriptor) create_activation = nullptr;
  decltype(&cudnnDestroyActivationDescriptor) destroy_activation = nullptr;
  decltype(&cudnnSetActivationDescriptor) set_activation = nullptr;
  decltype(&cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize) forward_workspace = nullptr;
  decltype(&cudnnGetBatchNormalizationBackwardExWorkspaceSize) backward_workspace = nullptr;
  decltype(&cudnnGetBatchNormalizationTrainingExReserveSpaceSize) reserve_space = nullptr;
  decltype(&cudnnBatchNormalizationForwardTrainingEx) forward = nullptr;
  decltype(&cudnnBatchNormalizationBackwardEx) backward = nullptr;
  /// Every function was found.
  bool complete = false;
};

/// The process's cuDNN functions, looked up once: first among the libraries already loaded, then in
/// libcudnn.so.9 / libcudnn.so if one of them is loaded.
inline const CudnnBatchNormApi& cudnn_batch_norm_api() {
  static const CudnnBatchNormApi api = [] {
    CudnnBatchNormApi a;
    std::vector<void*> scopes{RTLD_DEFAULT};
    for (const char* name : {"libcudnn.so.9", "libcudnn.so"}) {
      if (void* library = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) scopes.push_back(library);
    }
    bool all = true;
    auto find = [&](auto& slot, const char* symbol) {
      for (void* scope : scopes) {
        if (void* found = dlsym(scope, symbol)) {
          slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(found);
          return;
        }
      }
      all = false;
    };
    find(a.error_string, "cudnnGetErrorString");
    find(a.set_stream, "cudnnSetStream");
    find(a.create_tensor, "cudnnCreateTensorDescriptor");
    find(a.destroy_tensor, "cudnnDestroyTensorDescriptor");
    find(a.set_tensor_4d, "cudnnSetTensor4dDescriptor");
    find(a.derive_bn, "cudnnDeriveBNTensorDescriptor");
    find(a.create_activation, "cudnnCreateActivationDescriptor");
    find(a.destroy_activation, "cudnnDestroyActivationDescriptor");
    find(a.set_activation, "cudnnSetActivationDescriptor");
    find(a.forward_workspace, "cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize");
    find(a.backward_workspace, "cudnnGetBatchNormalizationBackwardExWorkspaceSize");
    find(a.reserve_space, "cudnnGetBatchNormalizationTrainingExReserveSpaceSize");
    find(a.forward, "cudnnBatchNormalizationForwardTrainingEx");
    find(a.backward, "cudnnBatchNormalizationBackwardEx");
    a.complete = all;
    return a;
  }();
  return api;
}

/// Throws c10::Error naming the cuDNN call and its status unless `status` is success.
inline void cudnn_check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  const auto& api = cudnn_batch_norm_api();
  TORCH_CHECK(false, "volt::nn: cuDNN's ", call, " failed: ",
              api.error_string ? api.error_string(status) : "unknown status", " (status ", static_cast<int>(status),
              ")");
}

/// One fused call's descriptors and buffer sizes, for an NHWC input of x's shape and type.
class CudnnBatchNormPlan {
 public:
  /// Describes x (4-D, channels-last) for the fused op with or without the residual add. `supported()` is false
  /// where cuDNN answers CUDNN_STATUS_NOT_SUPPORTED for this shape and type; other failures throw.
  CudnnBatchNormPlan(const torch::Tensor& x, bool add) : api_(cudnn_batch_norm_api()), add_(add) {
    cudnn_check(api_.create_tensor(&x_desc_), "cudnnCreateTensorDescriptor");
    cudnn_check(api_.create_tensor(&bn_desc_), "cudnnCreateTensorDescriptor");
    cudnn_check(api_.create_activation(&activation_), "cudnnCreateActivationDescriptor");
    cudnnDataType_t type = CUDNN_DATA_FLOAT;
    if (x.scalar_type() == torch::kHalf) type = CUDNN_DATA_HALF;
    if (x.scalar_type() == torch::kBFloat16) type = CUDNN_DATA_BFLOAT16;
    cudnn_check(api_.set_tensor_4d(x_desc_, CUDNN_TENSOR_NHWC, type, static_cast<int>(x.size(0)),
                                   static_cast<int>(x.size(1)), static_cast<int>(x.size(2)),
                                   static_cast<int>(x.size(3))),
                "cudnnSetTensor4dDescriptor");
    cudnn_check(api_.derive_bn(bn_desc_, x_desc_, mode), "cudnnDeriveBNTensorDescriptor");
    cudnn_check(api_.set_activation(activation_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
                "cudnnSetActivationDescriptor");
    handle_ = at::native::getCudnnHandle();
    const auto z_desc = add ? x_desc_ : nullptr;
    auto status = api_.forward_workspace(handle_, mode, ops(), x_desc_, z_desc, x_desc_, bn_desc_, activation_,
                                         &forward_bytes_);
    if (status == CUDNN_STATUS_SUCCESS) {
      status = api_.backward_workspace(handle_, mode, ops(), x_desc_, x_desc_, x_desc_, z_desc, x_desc_, bn_desc_,
                                       activation_, &backward_bytes_);
    }
    if (status == CUDNN_STATUS_SUCCESS) {
      status = api_.reserve_space(handle_, mode, ops(), activation_, x_desc_, &reserve_bytes_);
    }
    supported_ = status == CUDNN_STATUS_SUCCESS;
    if (!supported_ && status != CUDNN_STATUS_NOT_SUPPORTED) {
      cudnn_check(status, "cudnnGetBatchNormalization*WorkspaceSize");
    }
  }
  CudnnBatchNormPlan(const CudnnBatchNormPlan&) = delete;
  CudnnBatchNormPlan& operator=(const CudnnBatchNormPlan&) = delete;
  ~CudnnBatchNormPlan() {
    if (activation_) api_.destroy_activation(activation_);
    if (bn_desc_) api_.destroy_tensor(bn_desc_);
    if (x_desc_) api_.destroy_tensor(x_desc_);
  }

  /// cuDNN runs this shape and type fused.
  bool supported() const { return supported_; }
  /// The bytes of the reserve space the forward call fills and the backward call reads.
  std::size_t reserve_bytes() const { return reserve_bytes_; }

  /// y = relu(bn(x) [+ z]); updates the running statistics in place (when defined) with `factor`, and fills
  /// save_mean, save_invstd and reserve for the backward call.
  void forward(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& weight, const torch::Tensor& bias,
               const torch::Tensor& running_mean, const torch::Tensor& running_var, double factor, double eps,
               const torch::Tensor& y, const torch::Tensor& save_mean, const torch::Tensor& save_invstd,
               const torch::Tensor& reserve) const {
    cudnn_check(api_.set_stream(handle_, c10::cuda::getCurrentCUDAStream(x.get_device())), "cudnnSetStream");
    const auto workspace = bytes(x, forward_bytes_);
    const float one = 1.0f, zero = 0.0f;
    cudnn_check(api_.forward(handle_, mode, ops(), &one, &zero, x_desc_, x.data_ptr(), add_ ? x_desc_ : nullptr,
                             add_ ? z.data_ptr() : nullptr, x_desc_, y.data_ptr(), bn_desc_, weight.data_ptr(),
                             bias.data_ptr(), factor, running_mean.defined() ? running_mean.data_ptr() : nullptr,
                             running_var.defined() ? running_var.data_ptr() : nullptr, eps, save_mean.data_ptr(),
                             save_invstd.data_ptr(), activation_, workspace.data_ptr(), forward_bytes_,
                             reserve.data_ptr(), reserve_bytes_),
                "cudnnBatchNormalizationForwardTrainingEx");
  }

  /// The gradients of x, weight and bias (and of z, with the add) from dy, the forward's output y and what the
  /// forward call saved.
  void backward(const torch::Tensor& x, const torch::Tensor& y, const torch::Tensor& dy, const torch::Tensor& weight,
                const torch::Tensor& bias, double eps, const torch::Tensor& save_mean, const torch::Tensor& save_invstd,
                const torch::Tensor& reserve, const torch::Tensor& dx, const torch::Tensor& dz,
                const torch::Tensor& dweight, const torch::Tensor& dbias) const {
    cudnn_check(api_.set_stream(handle_, c10::cuda::getCurrentCUDAStream(x.get_device())), "cudnnSetStream");
    const auto workspace = bytes(x, backward_bytes_);
    const float one = 1.0f, zero = 0.0f;
    cudnn_check(api_.backward(handle_, mode, ops(), &one, &zero, &one, &zero, x_desc_, x.data_ptr(), x_desc_,
                              y.data_ptr(), x_desc_, dy.data_ptr(), add_ ? x_desc_ : nullptr,
                              add_ ? dz.data_ptr() : nullptr, x_desc_, dx.data_ptr(), bn_desc_, weight.data_ptr(),
                              bias.data_ptr(), dweight.data_ptr(), dbias.data_ptr(), eps, save_mean.data_ptr(),
                              save_invstd.data_ptr(), activation_, workspace.data_ptr(), backward_bytes_,
                              reserve.data_ptr(), reserve_bytes_),
                "cudnnBatchNormalizationBackwardEx");
  }

  /// A byte buffer of at least one byte on x's device (from LibTorch's caching allocator, so that a captured
  /// CUDA graph owns it).
  static torch::Tensor bytes(const torch::Tensor& x, std::size_t count) {
    return torch::empty({static_cast<std::int64_t>(count > 0 ? count : 1)}, x.options().dtype(torch::kByte));
  }

  /// The batch-norm mode: per channel, cuDNN's persistent NHWC kernels.
  static constexpr cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;

 private:
  cudnnBatchNormOps_t ops() const {
    return add_ ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
  }

  const CudnnBatchNormApi& api_;
  bool add_;
  bool supported_ = false;
  cudnnHandle_t handle_{};
  cudnnTensorDescriptor_t x_desc_{}, bn_desc_{};
  cudnnActivationDescriptor_t activation_{};
  std::size_t forward_bytes_ = 0, backward_bytes_ = 0, reserve_bytes_ = 0;
};

/// Whether cuDNN runs x's shape and type fused (asked once per shape, type, device and form, then remembered).
inline bool cudnn_shape_supported(const torch::Tensor& x, bool add) {
  using Key = std::tuple<std::array<std::int64_t, 4>, int, int, bool>;
  static std::mutex mutex;
  static std::vector<std::pair<Key, bool>> known;
  const Key key{{x.size(0), x.size(1), x.size(2), x.size(3)}, static_cast<int>(x.scalar_type()), x.get_device(), add};
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& [k, supported] : known) {
    if (k == key) return supported;
  }
  c10::cuda::CUDAGuard guard(x.device());
  const bool supported = CudnnBatchNormPlan(x, add).supported();
  known.emplace_back(key, supported);
  return supported;
}

/// The backward node of the fused op: cudnnBatchNormalizationBackwardEx from what the forward call saved. (A node
/// of its own rather than torch::autograd::Function, whose apply GCC 13 at -O3 flags with a false -Warray-bounds.)
struct CudnnBatchNormReLUBackward : torch::autograd::Node {
  torch::autograd::SavedVariable x, y, weight, bias;
  torch::Tensor save_mean, save_invstd, reserve;
  double eps = 0;
  bool add = false;

  /// The gradients of x, z (with the add), weight and bias from the output's gradient.
  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    const torch::Tensor none;
    if (grads.empty() || !grads[0].defined()) return {none, none, none, none};
    const auto input = x.unpack();
    const auto output = y.unpack(shared_from_this());
    const auto scale = weight.unpack();
    const auto shift = bias.unpack();
    TORCH_CHECK(reserve.defined(), "volt::nn: the fused batch norm's backward ran twice; its saved tensors are freed "
                                   "after the first (use retain_graph=true to run it again)");
    c10::cuda::CUDAGuard guard(input.device());
    const auto dy = grads[0].to(input.scalar_type()).contiguous(torch::MemoryFormat::ChannelsLast);
    const CudnnBatchNormPlan plan(input, add);
    auto dx = torch::empty_like(input, torch::MemoryFormat::ChannelsLast);
    auto dz = add ? torch::empty_like(input, torch::MemoryFormat::ChannelsLast) : torch::Tensor();
    auto dweight = torch::empty_like(scale, torch::MemoryFormat::Contiguous);
    auto dbias = torch::empty_like(shift, torch::MemoryFormat::Contiguous);
    plan.backward(input, output, dy, scale, shift, eps, save_mean, save_invstd, reserve, dx, dz, dweight, dbias);
    return {dx, dz, dweight, dbias};
  }

  /// "CudnnBatchNormReLUBackward" (what grad_fn's name shows).
  std::string name() const override { return "CudnnBatchNormReLUBackward"; }

  /// Frees the saved tensors once the graph has been run (unless retain_graph).
  void release_variables() override {
    x.reset_data();
    y.reset_data();
    weight.reset_data();
    bias.reset_data();
    save_mean.reset();
    save_invstd.reset();
    reserve.reset();
  }
};

/// relu(batch_norm(x) [+ z]) in training mode through cuDNN's fused kernels, differentiable in x, z, weight and
/// bias (through CudnnBatchNormReLUBackward). The running statistics are updated in place, as LibTorch's batch_norm
/// does.
inline torch::Tensor cudnn_batch_norm_relu_forward(const torch::Tensor& x, const torch::Tensor& z,
                                                   const torch::Tensor& weight, const torch::Tensor& bias,
                                                   const torch::Tensor& running_mean, const torch::Tensor& running_var,
                                                   double factor, double eps) {
  c10::cuda::CUDAGuard guard(x.device());
  const bool add = z.defined();
  const CudnnBatchNormPlan plan(x, add);
  auto y = torch::empty_like(x, torch::MemoryFormat::ChannelsLast);
  auto save_mean = torch::empty_like(weight, torch::MemoryFormat::Contiguous);
  auto save_invstd = torch::empty_like(weight, torch::MemoryFormat::Contiguous);
  auto reserve = CudnnBatchNormPlan::bytes(x, plan.reserve_bytes());
  plan.forward(x, z, weight, bias, running_mean, running_var, factor, eps, y, save_mean, save_invstd, reserve);
  const bool differentiable =
      torch::GradMode::is_enabled() && (x.requires_grad() || (add && z.requires_grad()) || weight.requires_grad() ||
                                        bias.requires_grad());
  if (!differentiable) return y;
  auto node = std::shared_ptr<CudnnBatchNormReLUBackward>(new CudnnBatchNormReLUBackward(),
                                                          torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(x, z, weight, bias));
  torch::autograd::set_history(y, node);
  node->x = torch::autograd::SavedVariable(x, /*is_output=*/false);
  node->y = torch::autograd::SavedVariable(y, /*is_output=*/true);
  node->weight = torch::autograd::SavedVariable(weight, /*is_output=*/false);
  node->bias = torch::autograd::SavedVariable(bias, /*is_output=*/false);
  node->save_mean = std::move(save_mean);
  node->save_invstd = std::move(save_invstd);
  node->reserve = std::move(reserve);
  node->eps = eps;
  node->add = add;
  return y;
}

#endif  // VOLT_DETAIL_HAS_CUDNN

/// Whether this build has the fused path (VOLT_DETAIL_HAS_CUDNN) and the process's cuDNN has its functions.
inline bool cudnn_fused_batch_norm_compiled() {
#if defined(VOLT_DETAIL_HAS_CUDNN)
  return cudnn_batch_norm_api().complete;
#else
  return false;
#endif
}

/// Whether relu(batch_norm(x) [+ z]) in training mode can run fused for these tensors: the fused path is compiled
/// and cuDNN is enabled (torch.backends.cudnn.enabled), x is a 4-D channels-last CUDA tensor of half, bfloat16 or
/// float with more than one value per channel, z (if defined) matches it in shape, type and layout, weight and bias
/// are float32 on x's device, and cuDNN supports the shape.
inline bool cudnn_fusable(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& weight,
                          const torch::Tensor& bias) {
#if defined(VOLT_DETAIL_HAS_CUDNN)
  if (!x.defined() || !x.is_cuda() || x.dim() != 4) return false;
  const auto type = x.scalar_type();
  if (type != torch::kHalf && type != torch::kBFloat16 && type != torch::kFloat) return false;
  if (!x.is_contiguous(torch::MemoryFormat::ChannelsLast) || x.numel() / x.size(1) <= 1) return false;
  if (x.size(0) > INT32_MAX || x.size(1) > INT32_MAX || x.size(2) > INT32_MAX || x.size(3) > INT32_MAX) return false;
  if (z.defined() && (z.sizes() != x.sizes() || z.scalar_type() != type || z.device() != x.device() ||
                      !z.is_contiguous(torch::MemoryFormat::ChannelsLast))) {
    return false;
  }
  for (const auto* p : {&weight, &bias}) {
    if (!p->defined() || p->scalar_type() != torch::kFloat || p->device() != x.device() || !p->is_contiguous()) {
      return false;
    }
  }
  if (!at::globalContext().userEnabledCuDNN() || !cudnn_fused_batch_norm_compiled()) return false;
  return cudnn_shape_supported(x, z.defined());
#else
  (void)x, (void)z, (void)weight, (void)bias;
  return false;
#endif
}

/// relu(batch_norm(x) [+ z]) in training mode through cuDNN, with autograd; call only where cudnn_fusable holds.
inline torch::Tensor cudnn_batch_norm_relu(const torch::Tensor& x, const torch::Tensor& z, const torch::Tensor& weight,
                                           const torch::Tensor& bias, const torch::Tensor& running_mean,
                                           const torch::Tensor& running_var, double factor, double eps) {
#if defined(VOLT_DETAIL_HAS_CUDNN)
  return cudnn_batch_norm_relu_forward(x, z, weight, bias, running_mean, running_var, factor, eps);
#else
  (void)x, (void)z, (void)weight, (void)bias, (void)running_mean, (void)running_var, (void)factor, (void)eps;
  TORCH_CHECK(false, "volt::nn: this build has no cuDNN fused batch norm (VOLT_DETAIL_HAS_CUDNN is not defined)");
#endif
}

}  // namespace volt::nn::detail
