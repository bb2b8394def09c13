// connect_mpi: the MPI bootstrap under connect().
#include "chorus/mpi.h"

#include "base/log.h"
#include "rendezvous/mpi/mpi_bootstrap.h"

namespace chorus {

std::shared_ptr<Context> connect_mpi(MPI_Comm communicator, const ConnectOptions& options) {
  MpiBootstrap bootstrap(communicator);
  CHORUS_LOG(info, bootstrap.rank(), "rendezvous over MPI: rank ", bootstrap.rank(), " of ", bootstrap.size());
  return connect(bootstrap, options);
}

}  // namespace chorus
