// MpiBootstrap: allgather of variable-length blobs in two MPI collectives
// (the lengths, then MPI_Allgatherv of the bytes), barrier as MPI_Barrier.
#include "rendezvous/mpi/mpi_bootstrap.h"

#include <climits>

#include "base/error.h"
#include "base/log.h"

namespace chorus {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return cat("MPI error code ", code);
  return std::string(text, static_cast<size_t>(length));
}

void check_mpi(int code, int rank, const char* call) {
  if (code != MPI_SUCCESS) throw IoError(cat("rank ", rank, ": ", call, " failed: ", mpi_error_text(code)));
}

}  // namespace

MpiBootstrap::MpiBootstrap(MPI_Comm communicator) {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw InvalidArgument("MpiBootstrap: MPI is not initialized (call MPI_Init first) or already finalized");
  if (communicator == MPI_COMM_NULL) throw InvalidArgument("MpiBootstrap: the communicator is MPI_COMM_NULL");
  check_mpi(MPI_Comm_dup(communicator, &communicator_), -1, "MPI_Comm_dup");
  // Errors come back as codes we turn into IoError, instead of MPI aborting the job.
  check_mpi(MPI_Comm_set_errhandler(communicator_, MPI_ERRORS_RETURN), -1, "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(communicator_, &rank_), -1, "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(communicator_, &size_), rank_, "MPI_Comm_size");
}

MpiBootstrap::~MpiBootstrap() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && communicator_ != MPI_COMM_NULL) MPI_Comm_free(&communicator_);
}

std::vector<std::vector<std::byte>> MpiBootstrap::allgather(std::span<const std::byte> mine) {
  const auto ranks = static_cast<size_t>(size_);
  uint64_t my_length = mine.size();
  std::vector<uint64_t> lengths(ranks);
  check_mpi(MPI_Allgather(&my_length, 1, MPI_UINT64_T, lengths.data(), 1, MPI_UINT64_T, communicator_), rank_,
            "MPI_Allgather of blob lengths");
  // MPI_Allgatherv counts and offsets are ints; addresses are tiny, so a
  // total past INT_MAX means a caller bug, reported on every rank alike.
  std::vector<int> counts(ranks);
  std::vector<int> offsets(ranks);
  uint64_t total = 0;
  for (size_t r = 0; r < ranks; ++r) {
    if (lengths[r] > static_cast<uint64_t>(INT_MAX) - total) {
      throw InvalidArgument(cat("rank ", rank_, ": MpiBootstrap allgather of ", size_, " blobs exceeds ", INT_MAX,
                                " bytes (rank ", r, "'s blob is ", lengths[r], " bytes)"));
    }
    counts[r] = static_cast<int>(lengths[r]);
    offsets[r] = static_cast<int>(total);
    total += lengths[r];
  }
  std::vector<std::byte> gathered(total);
  check_mpi(MPI_Allgatherv(mine.data(), counts[static_cast<size_t>(rank_)], MPI_BYTE, gathered.data(), counts.data(),
                           offsets.data(), MPI_BYTE, communicator_),
            rank_, "MPI_Allgatherv of blobs");
  std::vector<std::vector<std::byte>> blobs(ranks);
  for (size_t r = 0; r < ranks; ++r) {
    auto first = gathered.begin() + offsets[r];
    blobs[r].assign(first, first + counts[r]);
  }
  return blobs;
}

void MpiBootstrap::barrier() { check_mpi(MPI_Barrier(communicator_), rank_, "MPI_Barrier"); }

}  // namespace chorus
