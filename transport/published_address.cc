// Encoding and checking the published address, and the host identity.
#include "transport/published_address.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <fstream>
#include <map>

#include "base/error.h"
#include "base/little_endian.h"
#include "base/log.h"

namespace chorus::transport {
namespace {

constexpr uint32_t kMagic = 0x41504843;  // "CHPA"
constexpr uint16_t kVersion = 2;  // 2: the machine id and the CPUs
constexpr size_t kMaxHostName = 255;
constexpr size_t kMaxTranportName = 32;
constexpr size_t kMaxSection = 64 * 1024;
constexpr size_t kMaxSections = 16;

// Reads the blob, failing with one message that names both ranks.
class Reader {
 public:
  Reader(std::span<const std::byte> blob, int my_rank, int peer_rank)
      : in_(blob), size_(blob.size()), my_rank_(my_rank), peer_rank_(peer_rank) {}

  uint64_t number(size_t bytes, const char* what) {
    uint64_t value = 0;
    if (!in_.number(value, bytes)) fail(cat("truncated in ", what));
    return value;
  }
  std::span<const std::byte> bytes(size_t count, const char* what) {
    std::span<const std::byte> part;
    if (!in_.bytes(part, count)) fail(cat("truncated in ", what));
    return part;
  }
  bool done() const { return in_.left() == 0; }
  [[noreturn]] void fail(const std::string& why) const {
    throw InvalidArgument(cat("rank ", my_rank_, ": rank ", peer_rank_, " published ", size_,
                              " bytes that are not a chorus address of this version (", why,
                              "); is every rank running the same chorus?"));
  }

 private:
  LittleEndianReader in_;
  size_t size_;
  int my_rank_;
  int peer_rank_;
};

std::string as_string(std::span<const std::byte> bytes) {
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// FNV-1a: stable across processes and builds (std::hash is neither promised).
uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char c : text) hash = (hash ^ c) * 0x100000001b3ull;
  return hash;
}

}  // namespace

const PublishedAddress::Section* PublishedAddress::find(std::string_view transport) const {
  for (const Section& section : sections)
    if (section.transport == transport) return &section;
  return nullptr;
}

std::vector<std::byte> encode_published_address(const PublishedAddress& address) {
  if (address.host_name.size() > kMaxHostName || address.sections.size() > kMaxSections)
    throw InvalidArgument(cat("published address: host name of ", address.host_name.size(), " bytes or ",
                              address.sections.size(), " sections is too many"));
  LittleEndianWriter out;
  if (address.cpus.size() > kMaxCpuWords)
    throw InvalidArgument(cat("published address: ", address.cpus.size(), " words of CPUs is too many"));
  out.number(kMagic, 4).number(kVersion, 2).number(address.host_id, 8).number(address.machine_id, 8);
  out.number(address.cpus.size(), 1);
  for (uint64_t word : address.cpus) out.number(word, 8);
  out.number(address.host_name.size(), 1).text(address.host_name);
  out.number(address.sections.size(), 1);
  for (const auto& section : address.sections) {
    if (section.transport.size() > kMaxTranportName || section.address.size() > kMaxSection)
      throw InvalidArgument(cat("published address: the ", section.transport, " section of ",
                                section.address.size(), " bytes is too large"));
    out.number(section.transport.size(), 1).text(section.transport);
    out.number(section.address.size(), 4).raw(section.address);
  }
  return out.take();
}

PublishedAddress decode_published_address(std::span<const std::byte> blob, int my_rank, int peer_rank) {
  Reader in(blob, my_rank, peer_rank);
  if (in.number(4, "the magic") != kMagic) in.fail("bad magic");
  const uint64_t version = in.number(2, "the version");
  if (version != kVersion) in.fail(cat("version ", version, ", this rank speaks ", kVersion));
  PublishedAddress address;
  address.host_id = in.number(8, "the host id");
  address.machine_id = in.number(8, "the machine id");
  const uint64_t cpu_words = in.number(1, "the CPU word count");
  if (cpu_words > kMaxCpuWords) in.fail(cat(cpu_words, " words of CPUs"));
  for (uint64_t i = 0; i < cpu_words; ++i) address.cpus.push_back(in.number(8, "the CPUs"));
  address.host_name = as_string(in.bytes(in.number(1, "the host name"), "the host name"));
  const uint64_t sections = in.number(1, "the section count");
  if (sections > kMaxSections) in.fail(cat(sections, " sections"));
  for (uint64_t i = 0; i < sections; ++i) {
    PublishedAddress::Section section;
    const uint64_t name_bytes = in.number(1, "a transport name");
    if (name_bytes == 0 || name_bytes > kMaxTranportName) in.fail(cat("a transport name of ", name_bytes, " bytes"));
    section.transport = as_string(in.bytes(name_bytes, "a transport name"));
    const uint64_t address_bytes = in.number(4, "a section length");
    if (address_bytes > kMaxSection) in.fail(cat("a section of ", address_bytes, " bytes"));
    auto bytes = in.bytes(address_bytes, "a section");
    section.address.assign(bytes.begin(), bytes.end());
    if (address.find(section.transport)) in.fail(cat("transport ", section.transport, " twice"));
    address.sections.push_back(std::move(section));
  }
  if (!in.done()) in.fail("trailing bytes");
  return address;
}

uint64_t host_identity(const std::string& override, std::string& name) {
  if (!override.empty()) {
    name = override.substr(0, kMaxHostName);
    return fnv1a("CHORUS_HOST_ID=" + override);
  }
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  name = std::string(host).substr(0, kMaxHostName);
  return fnv1a(cat(host, "/", boot_id));
}

std::vector<uint64_t> cpu_words() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return {};
  std::vector<uint64_t> words(kMaxCpuWords, 0);
  for (size_t cpu = 0; cpu < kMaxCpuWords * 64 && cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) words[cpu / 64] |= uint64_t{1} << (cpu % 64);
  while (!words.empty() && words.back() == 0) words.pop_back();
  return words;
}

bool share_cpus(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  if (a.empty() || b.empty()) return true;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    if ((a[i] & b[i]) != 0) return true;
  return false;
}

double fewest_cores_per_rank(const std::vector<uint64_t>& machine_ids, const std::vector<std::vector<uint64_t>>& cpus) {
  if (machine_ids.size() != cpus.size()) return 0;
  struct Machine {
    std::vector<uint64_t> cpus;
    size_t ranks = 0;
  };
  std::map<uint64_t, Machine> machines;
  for (size_t rank = 0; rank < machine_ids.size(); ++rank) {
    if (cpus[rank].empty()) return 0;
    Machine& machine = machines[machine_ids[rank]];
    if (machine.cpus.size() < cpus[rank].size()) machine.cpus.resize(cpus[rank].size(), 0);
    for (size_t word = 0; word < cpus[rank].size(); ++word) machine.cpus[word] |= cpus[rank][word];
    ++machine.ranks;
  }
  double fewest = 0;
  for (const auto& [id, machine] : machines) {
    size_t cores = 0;
    for (uint64_t word : machine.cpus) cores += static_cast<size_t>(std::popcount(word));
    const double per_rank = static_cast<double>(cores) / static_cast<double>(machine.ranks);
    if (fewest == 0 || per_rank < fewest) fewest = per_rank;
  }
  return fewest;
}

uint64_t machine_identity() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  if (!boot_id.empty()) return fnv1a("boot " + boot_id);
  char host[HOST_NAME_MAX + 1] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return fnv1a(cat("host ", host));
}

}  // namespace chorus::transport
