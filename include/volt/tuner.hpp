/// \file
/// volt/tuner: the batch-size finder (Lightning's Tuner.scale_batch_size).
#pragma once

#include <volt/tuner/batch_size_finder.hpp>
