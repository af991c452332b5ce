/// \file
/// volt/serialization: the file formats. Weights files exchanged with Python (torch.save / torch.load, and
/// safetensors) and volt's crash-safe checkpoint files (written by the Trainer and Fabric, read by
/// load_checkpoint_weights).
#pragma once

#include <volt/serialization/checkpoint_hooks.hpp>
#include <volt/serialization/checkpoint_io.hpp>
#include <volt/serialization/module_archive.hpp>
#include <volt/serialization/safetensors.hpp>
#include <volt/serialization/weights.hpp>
