// chorus-run --store redis://: the ranks meet at a real redis-server that the
// test starts on a free port and stops afterwards.
#include <catch2/catch.hpp>

#include <string>

#include "test/launch/child_process.h"
#include "test/rendezvous/redis_server.h"

TEST_CASE("chorus-run --store redis:// connects every rank through Redis", "[launch][chorus-run][redis]") {
  chorus::test::RedisServer redis;
  chorus::test::ChildProcess run({chorus::test::binary_from_environment("CHORUS_RUN"), "-n", "3", "--store",
                                  redis.url(), "--", chorus::test::binary_from_environment("CHORUS_LAUNCH_RANK")},
                                 {});
  int status = run.wait(std::chrono::seconds(30));
  INFO(run.output());
  CHECK(status == 0);
  for (const char* rank : {"0", "1", "2"})
    CHECK_THAT(run.output(), Catch::Contains(std::string("[rank ") + rank + "] rank " + rank + " of 3 via CHORUS_*"));
}
