/// \file
/// volt/transfer: moving batches to a device (Lightning's move_data_to_device / Strategy.batch_to_device), and
/// the channels-last memory format.
#pragma once

#include <volt/core/apply.hpp>
#include <volt/transfer/batch_to_device.hpp>
#include <volt/transfer/memory_format.hpp>
