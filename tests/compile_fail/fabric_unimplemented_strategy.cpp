// expect: volt: Fabric runs volt::SingleDevice and volt::DDP; this strategy has no implementation
#include <volt/volt.hpp>

#include <string_view>

namespace fabric_unimplemented_strategy {

// A strategy type volt knows nothing about: declared, so the compile-time checks accept it, but not implemented.
struct ModelParallel {
  static constexpr std::string_view name = "model_parallel";
  static constexpr bool is_distributed = true;
};

#ifdef VOLT_COMPILE_FAIL_CONTROL
using Strategy = volt::DDP;
#else
using Strategy = ModelParallel;
#endif

volt::Fabric<volt::CPU, Strategy>* make(volt::FabricOptions options) {
  return new volt::Fabric<volt::CPU, Strategy>(options);
}

}  // namespace fabric_unimplemented_strategy
