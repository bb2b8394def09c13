// MpiBootstrap under a real mpirun (meson runs `mpirun -np 4 test_mpi_bootstrap`):
// allgather of blobs of every length, a Context over MPI_COMM_WORLD checked
// bit-exactly with allreduce and broadcast, and MPI_Comm_split halves giving
// two independent Contexts used interleaved with the world Context.
// Every rank runs the same test cases in the same order, as MPI requires.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "chorus/collectives.h"
#include "base/error.h"
#include "chorus/mpi.h"
#include "rendezvous/mpi/mpi_bootstrap.h"

namespace {

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

chorus::ConnectOptions loopback() {
  chorus::ConnectOptions options;
  options.hostname = "127.0.0.1";  // one host; the default route's address may not accept connections here
  options.timeout = std::chrono::seconds(30);
  return options;
}

// Element i of rank r's input: small integers, so float sums are exact.
float element(int rank, size_t i) { return static_cast<float>(rank * 3 + static_cast<int>(i % 251)); }

// Allreduce-sums `count` floats over `context`, whose ranks are world ranks
// `members` (members[context rank] = world rank), and checks every element.
void check_allreduce(chorus::Context& context, const std::vector<int>& members, size_t count) {
  REQUIRE(static_cast<size_t>(context.size()) == members.size());
  const int me = members[static_cast<size_t>(context.rank())];
  REQUIRE(me == world_rank());
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = element(me, i);
  chorus::allreduce(context, std::span(data), chorus::ReduceOp::sum);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    float expected = 0;
    for (int member : members) expected += element(member, i);
    if (data[i] != expected) ++wrong;
  }
  REQUIRE(wrong == 0);
}

std::vector<int> all_ranks() {
  std::vector<int> ranks(static_cast<size_t>(world_size()));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  return ranks;
}

}  // namespace

TEST_CASE("MpiBootstrap allgathers blobs of every length, in rank order, and barriers", "[mpi]") {
  chorus::MpiBootstrap bootstrap(MPI_COMM_WORLD);
  REQUIRE(bootstrap.rank() == world_rank());
  REQUIRE(bootstrap.size() == world_size());
  for (int round = 0; round < 3; ++round) {
    // Rank r's blob has r * 101 + round bytes (rank 0 in round 0: empty).
    auto blob_of = [round](int rank) {
      std::vector<std::byte> blob(static_cast<size_t>(rank * 101 + round));
      for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<std::byte>((rank * 7 + round + i) % 256);
      return blob;
    };
    auto blobs = bootstrap.allgather(blob_of(bootstrap.rank()));
    REQUIRE(blobs.size() == static_cast<size_t>(bootstrap.size()));
    for (int r = 0; r < bootstrap.size(); ++r) REQUIRE(blobs[static_cast<size_t>(r)] == blob_of(r));
    bootstrap.barrier();
  }
  REQUIRE_THROWS_AS(chorus::MpiBootstrap(MPI_COMM_NULL), chorus::InvalidArgument);
}

TEST_CASE("A Context over MPI_COMM_WORLD allreduces and broadcasts bit-exactly", "[mpi]") {
  auto context = chorus::connect_mpi(MPI_COMM_WORLD, loopback());
  REQUIRE(context->rank() == world_rank());
  REQUIRE(context->size() == world_size());
  for (size_t count : {size_t{1}, size_t{1000}, size_t{(1 << 18) + 3}}) {
    INFO("count " << count);
    check_allreduce(*context, all_ranks(), count);
  }
  for (int root = 0; root < context->size(); ++root) {
    std::vector<int64_t> data(5000);
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = context->rank() == root ? static_cast<int64_t>(root) * 1000000 + static_cast<int64_t>(i) : -1;
    chorus::broadcast(*context, std::span(data), root);
    size_t wrong = 0;
    for (size_t i = 0; i < data.size(); ++i) wrong += data[i] != static_cast<int64_t>(root) * 1000000 + static_cast<int64_t>(i);
    REQUIRE(wrong == 0);
  }
}

TEST_CASE("MPI_Comm_split halves give two independent Contexts beside the world Context", "[mpi]") {
  const int rank = world_rank();
  const int size = world_size();
  REQUIRE(size >= 2);
  const int color = rank < size / 2 ? 0 : 1;
  MPI_Comm half_communicator = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &half_communicator) == MPI_SUCCESS);
  std::vector<int> half_members;
  for (int r = 0; r < size; ++r)
    if ((r < size / 2 ? 0 : 1) == color) half_members.push_back(r);

  auto world = chorus::connect_mpi(MPI_COMM_WORLD, loopback());
  auto half = chorus::connect_mpi(half_communicator, loopback());
  REQUIRE(half->size() == static_cast<int>(half_members.size()));
  REQUIRE(half_members[static_cast<size_t>(half->rank())] == rank);
  // Interleaved: each half runs its own collectives between world collectives.
  for (int iteration = 0; iteration < 3; ++iteration) {
    check_allreduce(*half, half_members, 10000 + static_cast<size_t>(iteration));
    check_allreduce(*world, all_ranks(), 7000);
    check_allreduce(*half, half_members, 3);
  }
  half.reset();
  world.reset();
  MPI_Comm_free(&half_communicator);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int failed = Catch::Session().run(argc, argv);
  // A failure on any rank fails the job, whichever rank's exit code mpirun reports.
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any_failed != 0 ? 1 : 0;
}
