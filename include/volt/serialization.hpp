/// \file
/// volt/serialization: weights files exchanged with Python (torch.save / torch.load).
#pragma once

#include <volt/serialization/weights.hpp>
