/// \file
/// CUDA kernels compiled at run time: NVRTC turns a kernel's CUDA C source into machine code for the device's
/// architecture the first time a module needs it, the CUDA driver loads it, and launches go to LibTorch's current
/// stream (so they run in order with LibTorch's kernels and are recorded into a CUDA graph being captured).
///
/// Both libraries are looked up at run time: libnvrtc among the loaded libraries, then by its sonames, then next to
/// LibTorch (PyPI's nvidia-cuda-nvrtc package); libcuda.so.1 from the driver. A program links nothing more, and
/// where either is missing (or the compile fails) `RuntimeKernel::find` returns null with the reason, and the
/// modules that use it run LibTorch's ops instead. Kernels are compiled without fast-math options (IEEE division
/// and square roots, denormals kept), as LibTorch's own CUDA kernels are. Compiled where
/// VOLT_DETAIL_HAS_RUNTIME_KERNELS is defined (volt/core/compat.hpp: a CUDA LibTorch on Linux).
#pragma once

#include <volt/core/compat.hpp>

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
#endif

namespace volt::nn::detail {

#if defined(VOLT_DETAIL_HAS_RUNTIME_KERNELS)

/// The NVRTC and driver functions a runtime kernel needs (their C signatures, with opaque handles as void*).
struct RuntimeKernelApi {
  using Program = void*;
  const char* (*nvrtc_error_string)(int) = nullptr;
  int (*nvrtc_create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*nvrtc_destroy)(Program*) = nullptr;
  int (*nvrtc_compile)(Program, int, const char* const*) = nullptr;
  int (*nvrtc_log_size)(Program, std::size_t*) = nullptr;
  int (*nvrtc_log)(Program, char*) = nullptr;
  int (*nvrtc_cubin_size)(Program, std::size_t*) = nullptr;
  int (*nvrtc_cubin)(Program, char*) = nullptr;
  int (*cu_error_string)(int, const char**) = nullptr;
  int (*cu_module_load_data)(void**, const void*) = nullptr;
  int (*cu_module_get_function)(void**, void*, const char*) = nullptr;
  int (*cu_launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, cudaStream_t, void**,
                   void**) = nullptr;
  int (*cu_ctx_get_current)(void**) = nullptr;
  /// Empty when every NVRTC function was found; else what is missing.
  std::string nvrtc_missing;
  /// Empty when every driver function was found; else what is missing.
  std::string driver_missing;
};

/// libnvrtc: already loaded, by soname, or next to LibTorch's libraries (PyPI's wheels keep it in
/// nvidia/cu13/lib or nvidia/cuda_nvrtc/lib beside torch/, older wheels in torch/lib under a hashed name).
inline void* open_nvrtc() {
  const char* sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
  for (const char* name : sonames) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return library;
  }
  for (const char* name : sonames) {
    if (void* library = dlopen(name, RTLD_NOW | RTLD_GLOBAL)) return library;
  }
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&c10::cuda::device_count), &info) == 0 || info.dli_fname == nullptr) {
    return nullptr;
  }
  std::error_code error;
  const auto torch_lib = std::filesystem::path(info.dli_fname).parent_path();
  std::vector<std::filesystem::path> candidates;
  for (const char* relative : {"../../nvidia/cu13/lib", "../../nvidia/cuda_nvrtc/lib", "."}) {
    const auto dir = torch_lib / relative;
    for (std::filesystem::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
      const auto file = it->path().filename().string();
      if (file.rfind("libnvrtc", 0) == 0 && file.find("builtins") == std::string::npos &&
          file.find(".so") != std::string::npos) {
        candidates.push_back(it->path());
      }
    }
  }
  for (const auto& path : candidates) {
    if (void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL)) return library;
  }
  return nullptr;
}

/// The process's NVRTC and driver functions, looked up once.
inline const RuntimeKernelApi& runtime_kernel_api() {
  static const RuntimeKernelApi api = [] {
    RuntimeKernelApi a;
    auto find = [](void* library, auto& slot, const char* symbol, std::string& missing) {
      if (void* found = dlsym(library, symbol)) {
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(found);
      } else {
        missing += std::string(missing.empty() ? "" : ", ") + symbol;
      }
    };
    if (void* nvrtc = open_nvrtc()) {
      find(nvrtc, a.nvrtc_error_string, "nvrtcGetErrorString", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_create, "nvrtcCreateProgram", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_destroy, "nvrtcDestroyProgram", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_compile, "nvrtcCompileProgram", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_log_size, "nvrtcGetProgramLogSize", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_log, "nvrtcGetProgramLog", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_cubin_size, "nvrtcGetCUBINSize", a.nvrtc_missing);
      find(nvrtc, a.nvrtc_cubin, "nvrtcGetCUBIN", a.nvrtc_missing);
    } else {
      a.nvrtc_missing = "libnvrtc (no libnvrtc.so.13/.12/.11.2 loadable, none next to LibTorch)";
    }
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (driver == nullptr) driver = dlopen("libcuda.so.1", RTLD_NOW);
    if (driver != nullptr) {
      find(driver, a.cu_error_string, "cuGetErrorString", a.driver_missing);
      find(driver, a.cu_module_load_data, "cuModuleLoadData", a.driver_missing);
      find(driver, a.cu_module_get_function, "cuModuleGetFunction", a.driver_missing);
      find(driver, a.cu_launch, "cuLaunchKernel", a.driver_missing);
      find(driver, a.cu_ctx_get_current, "cuCtxGetCurrent", a.driver_missing);
    } else {
      a.driver_missing = "libcuda.so.1 (the CUDA driver)";
    }
    return a;
  }();
  return api;
}

/// Compiles `source` with NVRTC for the architecture sm_<arch> (e.g. 90) and returns the machine code (CUBIN);
/// on failure returns nothing and sets `*error` to NVRTC's message and log. Needs libnvrtc only, no GPU.
inline std::vector<char> nvrtc_compile(const std::string& source, const std::string& name, int arch,
                                       std::string* error) {
  const auto& api = runtime_kernel_api();
  if (!api.nvrtc_missing.empty()) {
    if (error != nullptr) *error = "runtime kernels need " + api.nvrtc_missing;
    return {};
  }
  RuntimeKernelApi::Program program = nullptr;
  int status = api.nvrtc_create(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (status != 0) {
    if (error != nullptr) *error = std::string("nvrtcCreateProgram: ") + api.nvrtc_error_string(status);
    return {};
  }
  const std::string arch_option = "--gpu-architecture=sm_" + std::to_string(arch);
  const char* options[] = {arch_option.c_str(), "--std=c++17", "-default-device"};
  status = api.nvrtc_compile(program, 3, options);
  std::vector<char> cubin;
  if (status != 0) {
    std::size_t size = 0;
    api.nvrtc_log_size(program, &size);
    std::string log(size, '\0');
    if (size > 0) api.nvrtc_log(program, log.data());
    if (error != nullptr) {
      *error = "NVRTC could not compile " + name + " for sm_" + std::to_string(arch) + ": " +
               api.nvrtc_error_string(status) + "\n" + log;
    }
  } else {
    std::size_t size = 0;
    api.nvrtc_cubin_size(program, &size);
    cubin.resize(size);
    api.nvrtc_cubin(program, cubin.data());
  }
  api.nvrtc_destroy(&program);
  return cubin;
}

/// One kernel function compiled for one device. Made by find(), kept for the life of the process (a CUDA
/// module is not unloaded: a captured graph may still launch it).
class RuntimeKernel {
 public:
  /// The kernel `function` of `source` compiled for `device` (cached by source, function and device), or null
  /// with `*why` set when runtime kernels are unavailable or the source does not compile or load. Call it
  /// outside CUDA graph capture the first time (volt's cuda_graphs runs eager steps before it captures).
  static const RuntimeKernel* find(const std::string& source, const std::string& function, int device,
                                   std::string* why) {
    using Key = std::tuple<std::string, std::string, int>;
    static std::mutex mutex;
    static std::map<Key, std::pair<std::unique_ptr<RuntimeKernel>, std::string>> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto& entry = cache[Key{source, function, device}];
    if (!entry.first && entry.second.empty()) {
      entry.second = "not compiled";
      auto kernel = std::unique_ptr<RuntimeKernel>(new RuntimeKernel());
      entry.second = kernel->build(source, function, device);
      if (entry.second.empty()) entry.first = std::move(kernel);
    }
    if (!entry.first && why != nullptr) *why = entry.second;
    return entry.first.get();
  }

  /// Launches the kernel on `device`'s current LibTorch stream with `arguments` (pointers to each argument's
  /// value, as cuLaunchKernel takes them). Throws c10::Error with the driver's message if the launch fails.
  void launch(unsigned grid, unsigned block, unsigned shared_bytes, void** arguments) const {
    launch_2d(grid, 1, block, 1, shared_bytes, arguments);
  }

  /// The same with a two-dimensional grid and block.
  void launch_2d(unsigned grid_x, unsigned grid_y, unsigned block_x, unsigned block_y, unsigned shared_bytes,
                 void** arguments) const {
    const auto& api = runtime_kernel_api();
    const auto stream = c10::cuda::getCurrentCUDAStream(device_).stream();
    const int status = api.cu_launch(function_, grid_x, grid_y, 1, block_x, block_y, 1, shared_bytes, stream,
                                     arguments, nullptr);
    if (status != 0) {
      const char* text = nullptr;
      api.cu_error_string(status, &text);
      TORCH_CHECK(false, "volt::nn: launching the runtime kernel ", name_, " failed: ",
                  text != nullptr ? text : "unknown CUDA driver error", " (", status, ")");
    }
  }

 private:
  RuntimeKernel() = default;

  /// Compiles and loads; returns "" on success, else why not.
  std::string build(const std::string& source, const std::string& function, int device) {
    const auto& api = runtime_kernel_api();
    if (!api.driver_missing.empty()) return "runtime kernels need " + api.driver_missing;
    device_ = static_cast<c10::DeviceIndex>(device);
    name_ = function;
    c10::cuda::CUDAGuard guard(device_);
    void* context = nullptr;
    if (api.cu_ctx_get_current(&context) != 0 || context == nullptr) {
      cudaFree(nullptr);  // makes the device's primary context current in this thread
    }
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) return "cudaGetDeviceProperties failed";
    std::string error;
    cubin_ = nvrtc_compile(source, function, properties.major * 10 + properties.minor, &error);
    if (cubin_.empty()) return error;
    int status = 0;
    const char* text = nullptr;
    if ((status = api.cu_module_load_data(&module_, cubin_.data())) != 0 ||
        (status = api.cu_module_get_function(&function_, module_, function.c_str())) != 0) {
      api.cu_error_string(status, &text);
      return "the CUDA driver could not load " + function + ": " + (text != nullptr ? text : "unknown error");
    }
    return "";
  }

  c10::DeviceIndex device_ = 0;
  std::string name_;
  std::vector<char> cubin_;
  void* module_ = nullptr;
  void* function_ = nullptr;
};

/// The number of multiprocessors of `device` (for the kernels' grids), asked once per device.
inline int multiprocessor_count(int device) {
  static std::mutex mutex;
  static std::map<int, int> known;
  std::lock_guard<std::mutex> lock(mutex);
  auto& count = known[device];
  if (count == 0) {
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
      count = 1;
    }
  }
  return count;
}

/// A forward and a backward kernel compiled from one source (both null when either cannot be).
struct RuntimeKernelPair {
  const RuntimeKernel* forward = nullptr;
  const RuntimeKernel* backward = nullptr;
};

/// The kernels `forward_name` and `backward_name` of the source `make_source(variant)` for `device`, compiled on
/// first use and remembered per variant (`variant.key()`) and device, so a call after the first makes no source
/// string; both null, with the reason in `*why`, when they cannot be compiled or loaded.
template <typename Variant, typename MakeSource>
RuntimeKernelPair runtime_kernel_pair(const Variant& variant, int device, const char* forward_name,
                                      const char* backward_name, MakeSource make_source, std::string* why) {
  using Key = std::tuple<decltype(variant.key()), int>;
  static std::mutex mutex;
  static std::map<Key, std::pair<RuntimeKernelPair, std::string>> known;
  std::lock_guard<std::mutex> lock(mutex);
  const Key key{variant.key(), device};
  auto found = known.find(key);
  if (found == known.end()) {
    const std::string source = make_source(variant);
    std::string error;
    RuntimeKernelPair kernels;
    kernels.forward = RuntimeKernel::find(source, forward_name, device, &error);
    if (kernels.forward != nullptr) kernels.backward = RuntimeKernel::find(source, backward_name, device, &error);
    if (kernels.backward == nullptr) kernels = {};
    found = known.emplace(key, std::make_pair(kernels, error)).first;
  }
  if (found->second.first.forward == nullptr && why != nullptr) *why = found->second.second;
  return found->second.first;
}

#endif  // VOLT_DETAIL_HAS_RUNTIME_KERNELS

}  // namespace volt::nn::detail
