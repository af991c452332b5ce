/// \file
/// volt/callbacks: values the Trainer calls at fixed points of training.
#pragma once

#include <volt/callbacks/hooks.hpp>
#include <volt/callbacks/callback.hpp>
#include <volt/callbacks/model_checkpoint.hpp>
#include <volt/callbacks/early_stopping.hpp>
#include <volt/callbacks/gradient_accumulation_scheduler.hpp>
#include <volt/callbacks/timer.hpp>
#include <volt/callbacks/progress_bar.hpp>
#include <volt/callbacks/model_summary.hpp>
#include <volt/callbacks/learning_rate_monitor.hpp>
#include <volt/callbacks/device_stats_monitor.hpp>
#include <volt/callbacks/histogram_monitor.hpp>
#include <volt/callbacks/weight_averaging.hpp>
#include <volt/callbacks/stochastic_weight_averaging.hpp>
