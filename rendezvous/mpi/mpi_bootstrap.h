// Rendezvous where mpirun (or any MPI launcher) started the job: the ranks of
// an MPI communicator exchange transport addresses with MPI_Allgatherv, then
// chorus runs on its own connections; MPI carries nothing else. Part of
// libchorus_mpi (pkg-config chorus-mpi), installed as <chorus/mpi_bootstrap.h>,
// so programs that link only libchorus never depend on MPI.
//
//   MPI_Init(&argc, &argv);
//   auto context = chorus::connect_mpi(MPI_COMM_WORLD);
//   ... collectives on *context ...
//   context.reset();
//   MPI_Finalize();
#pragma once

#include <mpi.h>

#include <memory>

#include "chorus/bootstrap.h"
#include "chorus/connect.h"

namespace chorus {

class MpiBootstrap : public Bootstrap {
 public:
  // Duplicates `communicator` (a collective call over it), so chorus's
  // messages can never match the application's. MPI must be initialized.
  explicit MpiBootstrap(MPI_Comm communicator);
  ~MpiBootstrap() override;
  MpiBootstrap(const MpiBootstrap&) = delete;
  MpiBootstrap& operator=(const MpiBootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // Blobs of any length per rank; IoError carries MPI's error string. Like
  // every MPI collective this has no timeout: MPI launchers end the whole job
  // when one rank dies, which is what unblocks it.
  std::vector<std::vector<std::byte>> allgather(std::span<const std::byte> mine) override;
  void barrier() override;

 private:
  MPI_Comm communicator_ = MPI_COMM_NULL;
  int rank_ = -1;
  int size_ = 0;
};

// A Context over the ranks of `communicator`, ranked as in it (collective
// over the communicator). Sub-communicators give independent Contexts.
std::shared_ptr<Context> connect_mpi(MPI_Comm communicator, const ConnectOptions& options = {});

}  // namespace chorus
