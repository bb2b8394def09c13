// Rendezvous where mpirun (or any MPI launcher) started the job: the ranks of
// an MPI communicator exchange transport addresses with MPI_Allgatherv, then
// chorus runs on its own connections; MPI carries nothing else. Part of
// libchorus_mpi (pkg-config chorus-mpi), so programs that link only libchorus
// never depend on MPI. Programs call connect_mpi (<chorus/mpi.h>).
#pragma once

#include <mpi.h>

#include <memory>

#include "rendezvous/bootstrap.h"

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

}  // namespace chorus
