/// \file
/// volt/loggers: where logged metrics are written.
#pragma once

#include <volt/loggers/logger.hpp>
#include <volt/loggers/csv_logger.hpp>
#include <volt/loggers/tensorboard_logger.hpp>
