// The link models selection reads: the override syntax (CHORUS_LINK_MODEL,
// per level), the TCP device's built-in model per peer, and an override
// failing connect on a malformed value.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <thread>

#include "base/error.h"
#include "base/link_model.h"
#include "chorus/chorus.h"
#include "transport/tcp/tcp.h"

using namespace chorus;
using namespace chorus::transport;
using namespace std::chrono_literals;

namespace {
const LinkModel base{.alpha_seconds = 1e-3, .beta_seconds_per_byte = 1e-6};

struct EnvironmentVariable {
  EnvironmentVariable(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~EnvironmentVariable() { ::unsetenv(name_); }
  const char* name_;
};

// Two loopback TCP devices connected to each other; returns rank 0's.
std::unique_ptr<Device> connected_pair(std::optional<LinkModel> model, std::unique_ptr<Device>& other,
                                       std::unique_ptr<Pair>& pair0, std::unique_ptr<Pair>& pair1) {
  tcp::TcpDeviceOptions options;
  options.hostname = "127.0.0.1";
  options.size = 2;
  options.link_model = model;
  auto zero = tcp::create_device(options);
  options.rank = 1;
  other = tcp::create_device(options);
  const auto address0 = zero->address(), address1 = other->address();
  std::thread dialer([&] { pair1 = other->connect(0, address0, Deadline::after(10s)); });
  pair0 = zero->connect(1, address1, Deadline::after(10s));
  dialer.join();
  return zero;
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
  // fuzz/launch_env found these: positive, but 0 s and infinite s/byte once scaled.
  CHECK_THROWS_WITH(parse_link_model("alpha_us=1e-320", base), Catch::Contains("positive number"));
  CHECK_THROWS_WITH(parse_link_model("gbps=5e-324", base), Catch::Contains("positive number"));
  const LinkModel smallest = parse_link_model("alpha_us=1e-12,gbps=1e-12", base);
  CHECK(smallest.alpha_seconds > 0);
  CHECK(std::isfinite(smallest.beta_seconds_per_byte));
}

TEST_CASE("link model overrides apply per level", "[link_model]") {
  const char* text = "alpha_us=9; local:gbps=8; remote:gbps=0.125,alpha_us=40";
  const LinkModel local = apply_link_model_override(text, LinkLevel::local, base);
  const LinkModel remote = apply_link_model_override(text, LinkLevel::remote, base);
  CHECK(local.alpha_seconds == Approx(9e-6));
  CHECK(local.beta_seconds_per_byte == Approx(1.0 / 8e9));
  CHECK(remote.alpha_seconds == Approx(40e-6));
  CHECK(remote.beta_seconds_per_byte == Approx(1.0 / 0.125e9));
  // Without a level every link takes it, as before levels existed.
  CHECK(apply_link_model_override("gbps=2", LinkLevel::remote, base).beta_seconds_per_byte == Approx(0.5e-9));
  CHECK(apply_link_model_override("gbps=2", LinkLevel::local, base).beta_seconds_per_byte == Approx(0.5e-9));
  // The other level's part is checked too.
  CHECK_THROWS_WITH(apply_link_model_override("remote:gbps=x", LinkLevel::local, base), Catch::Contains("'x'"));
  CHECK_THROWS_WITH(apply_link_model_override("rack:gbps=1", LinkLevel::local, base),
                    Catch::Contains("unknown level 'rack'"));
}

TEST_CASE("the TCP device reports a link model per peer", "[link_model]") {
  std::unique_ptr<Device> other;
  std::unique_ptr<Pair> pair0, pair1;
  SECTION("built in: a loopback peer is on this host") {
    auto device = connected_pair(std::nullopt, other, pair0, pair1);
    const LinkModel same_host = device->link_model(1);
    CHECK(same_host.alpha_seconds > 0);
    CHECK(same_host.beta_seconds_per_byte > 0);
    // An unconnected peer (here: out of range) gets the network model, which is slower.
    CHECK(device->link_model(7).beta_seconds_per_byte > same_host.beta_seconds_per_byte);
  }
  SECTION("options win") {
    const LinkModel model{.alpha_seconds = 3e-6, .beta_seconds_per_byte = 1e-10};
    auto device = connected_pair(model, other, pair0, pair1);
    CHECK(device->link_model(1).alpha_seconds == Approx(3e-6));
  }
}

TEST_CASE("a malformed CHORUS_LINK_MODEL fails connect, naming it", "[link_model]") {
  EnvironmentVariable variable("CHORUS_LINK_MODEL", "alpha=7");
  StoreBootstrap bootstrap(std::make_shared<HashStore>(), 0, 1, 5s);
  CHECK_THROWS_WITH(connect(bootstrap), Catch::Contains("CHORUS_LINK_MODEL"));
}
