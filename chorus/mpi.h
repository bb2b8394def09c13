// Joining a job that mpirun (or any MPI launcher) started: MPI exchanges the
// transport addresses, then chorus runs on its own connections. Part of
// libchorus_mpi (pkg-config chorus-mpi), so programs that link only libchorus
// never depend on MPI.
//
//   MPI_Init(&argc, &argv);
//   auto context = chorus::connect_mpi(MPI_COMM_WORLD);
//   ... collectives on *context ...
//   context.reset();
//   MPI_Finalize();
#pragma once

#include <mpi.h>

#include <memory>

#include "chorus/connect.h"
#include "chorus/context.h"

namespace chorus {

// A Context over the ranks of `communicator`, ranked as in it (collective
// over the communicator). Sub-communicators give independent Contexts.
std::shared_ptr<Context> connect_mpi(MPI_Comm communicator, const ConnectOptions& options = {});

}  // namespace chorus
