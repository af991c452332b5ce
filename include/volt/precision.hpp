/// \file
/// volt/precision: umbrella header of this area.
///
/// Precision policies (FP32, FP64, FP16True, BF16True, FP16Autocast, BF16Autocast), the autocast and
/// default-dtype scope guards, the GradScaler, and the compile-time accelerator/precision rules.
#pragma once

#include <volt/precision/autocast.hpp>
#include <volt/precision/compatibility.hpp>
#include <volt/precision/grad_scaler.hpp>
#include <volt/precision/policies.hpp>
#include <volt/precision/precision_policy.hpp>
