// expect: volt::Fabric::setup\(model, optimizer\): pass the optimizer as a std::shared_ptr
#include <volt/volt.hpp>

#include <memory>
#include <utility>

namespace fabric_setup_optimizer_not_shared {

void setup_with(volt::Fabric<volt::CPU>& fabric, std::shared_ptr<torch::nn::Linear> model) {
  auto optimizer = std::make_shared<torch::optim::SGD>((*model)->parameters(), torch::optim::SGDOptions(0.1));
#ifdef VOLT_COMPILE_FAIL_CONTROL
  auto result = fabric.setup(*model, optimizer);
#else
  auto result = fabric.setup(*model, optimizer.get());
#endif
  (void)result;
}

}  // namespace fabric_setup_optimizer_not_shared
