// Umbrella header of ferry's C++ API.
#pragma once

#include "ferry/comm.hpp"
#include "ferry/memory.hpp"
#include "ferry/status.hpp"
#include "ferry/types.hpp"
