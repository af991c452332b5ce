/// \file
/// volt/trainer: the Trainer and what a model's steps see.
#pragma once

#include <volt/trainer/options.hpp>
#include <volt/trainer/state.hpp>
#include <volt/trainer/step_context.hpp>
#include <volt/trainer/module.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/trainer/data.hpp>
#include <volt/trainer/trainer.hpp>
