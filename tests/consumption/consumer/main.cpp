// A user program that reaches volt through one of the ways volt can be consumed.
#include <volt/volt.hpp>

#include <iostream>

int main() {
  // Something from each layer, so a broken package shows up as a compile, link or run failure.
  auto batch = volt::batch_to_device(std::vector<torch::Tensor>{torch::ones({2})}, torch::Device("cpu"));
  const auto devices = volt::CPU::parse_devices(volt::DeviceSpec{"2"});
  if (!devices || devices->size() != 2 || batch.size() != 1) return 1;
  std::cout << "volt " << volt::version << " consumed: " << devices->size() << " cpu devices\n";
  return 0;
}
