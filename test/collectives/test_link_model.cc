// The link model selection reads: CHORUS_LINK_MODEL parsing, and the TCP
// device reporting the configured numbers (options first, then the
// environment, then its built-in estimate).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "base/error.h"
#include "base/link_model.h"
#include "transport/tcp/tcp.h"

using namespace chorus;
using namespace chorus::transport;

namespace {
const LinkModel base{.alpha_seconds = 1e-3, .beta_seconds_per_byte = 1e-6};

struct EnvironmentVariable {
  EnvironmentVariable(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvironmentVariable() { ::unsetenv(name_); }
  const char* name_;
};

std::unique_ptr<Device> loopback_device(std::optional<LinkModel> model = std::nullopt) {
  tcp::TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.link_model = model;
  return tcp::create_device(options);
}
}  // namespace

TEST_CASE("CHORUS_LINK_MODEL syntax", "[link_model]") {
  LinkModel both = parse_link_model("alpha_us=25, gbps=2", base);
  CHECK(both.alpha_seconds == Approx(25e-6));
  CHECK(both.beta_seconds_per_byte == Approx(1.0 / 2e9));
  LinkModel alpha_only = parse_link_model("alpha_us=8", base);
  CHECK(alpha_only.alpha_seconds == Approx(8e-6));
  CHECK(alpha_only.beta_seconds_per_byte == base.beta_seconds_per_byte);
  CHECK(parse_link_model("", base).alpha_seconds == base.alpha_seconds);

  CHECK_THROWS_WITH(parse_link_model("latency=3", base), Catch::Contains("unknown key 'latency'"));
  CHECK_THROWS_WITH(parse_link_model("alpha_us=-1", base), Catch::Contains("positive number"));
  CHECK_THROWS_WITH(parse_link_model("gbps=fast", base), Catch::Contains("'fast'"));
  CHECK_THROWS_WITH(parse_link_model("gbps", base), Catch::Contains("key=value"));
  CHECK_THROWS_AS(parse_link_model("gbps=0", base), InvalidArgument);
}

TEST_CASE("the TCP device reports the configured link model", "[link_model]") {
  SECTION("built in, for loopback") {
    LinkModel model = loopback_device()->link_model();
    CHECK(model.alpha_seconds > 0);
    CHECK(model.beta_seconds_per_byte > 0);
  }
  SECTION("from the environment") {
    EnvironmentVariable variable("CHORUS_LINK_MODEL", "alpha_us=7,gbps=4");
    LinkModel model = loopback_device()->link_model();
    CHECK(model.alpha_seconds == Approx(7e-6));
    CHECK(model.beta_seconds_per_byte == Approx(0.25e-9));
  }
  SECTION("options win over the environment") {
    EnvironmentVariable variable("CHORUS_LINK_MODEL", "alpha_us=7");
    LinkModel model = loopback_device(LinkModel{.alpha_seconds = 3e-6, .beta_seconds_per_byte = 1e-10})->link_model();
    CHECK(model.alpha_seconds == Approx(3e-6));
  }
  SECTION("a malformed variable fails device creation, naming it") {
    EnvironmentVariable variable("CHORUS_LINK_MODEL", "alpha=7");
    CHECK_THROWS_WITH(loopback_device(), Catch::Contains("CHORUS_LINK_MODEL"));
  }
}
