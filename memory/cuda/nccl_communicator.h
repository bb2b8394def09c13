// An NCCL communicator made through the module's table (module_api.h): the
// libchorus side of runtime.h's NcclCommunicator, whose calls throw chorus
// errors where the module reports a failure.
#pragma once

#include <memory>

#include "memory/cuda/module_api.h"
#include "memory/cuda/runtime.h"

namespace chorus::cuda {

// Takes `communicator` (from the table's nccl_init) and destroys it with itself.
std::unique_ptr<NcclCommunicator> module_nccl_communicator(const ModuleApi& api, void* communicator);

}  // namespace chorus::cuda
