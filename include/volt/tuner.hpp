/// \file
/// volt/tuner: the batch-size finder (Lightning's Tuner.scale_batch_size) and the learning-rate finder
/// (Tuner.lr_find).
#pragma once

#include <volt/tuner/batch_size_finder.hpp>
#include <volt/tuner/lr_finder.hpp>
