// Writes the seed corpus (fuzz/corpus/<harness>/) with the library's own
// encoders: small valid inputs and a few near-valid ones, in each harness's
// input layout (see the comment at the top of each harness).
//
//   build-fuzz/fuzz/make_corpus fuzz/corpus
//
// Files are named by content, so running it again adds nothing new.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "rendezvous/tcp_store_protocol.h"
#include "transport/cuda_ipc/descriptor.h"
#include "transport/published_address.h"
#include "transport/shm/address.h"
#include "transport/shm/side_channel.h"
#include "transport/tcp/address.h"
#include "transport/tcp/frame.h"

using namespace chorus;
using namespace chorus::fuzz;
using namespace chorus::transport;

namespace {

std::string root;

// FNV-1a of the content: a stable name.
std::string name_of(const std::vector<uint8_t>& data) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (uint8_t byte : data) hash = (hash ^ byte) * 0x100000001b3ull;
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

void write(const std::string& harness, const std::vector<uint8_t>& data) {
  const std::string directory = root + "/" + harness;
  ::mkdir(directory.c_str(), 0755);
  std::ofstream(directory + "/seed-" + name_of(data), std::ios::binary)
      .write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

void write(const std::string& harness, const ByteWriter& writer) { write(harness, writer.data()); }

void write_text(const std::string& harness, const std::string& text) {
  write(harness, std::vector<uint8_t>(text.begin(), text.end()));
}

void write_bytes(const std::string& harness, uint8_t first, const std::vector<std::byte>& bytes) {
  ByteWriter writer;
  writer.u8(first).bytes(bytes);
  write(harness, writer);
}

std::vector<std::byte> as_bytes(std::string_view text) {
  std::vector<std::byte> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

// ------------------------------------------------------------ tcp_frames

void tcp_frames() {
  auto post = [](ByteWriter& w, int tag, int size) { w.u8(0).u8(tag).u8(0).u16(size); };
  auto send = [](ByteWriter& w, int tag, int size) { w.u8(1).u8(tag).u8(0).u16(size).u8(9); };
  auto read = [](ByteWriter& w) { w.u8(6); };
  {
    ByteWriter w;  // receive posted first, then its message
    post(w, 0, 100);
    send(w, 0, 100);
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // unexpected messages of every tag, then their receives
    for (int tag = 0; tag < 4; ++tag) send(w, tag, 40 * tag);
    read(w);
    for (int tag = 0; tag < 4; ++tag) post(w, tag, 40 * tag);
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // a large message, read while it arrives, and a receive of the wrong size
    post(w, 1, 2000);
    send(w, 1, 2000);
    post(w, 1, 10);
    send(w, 1, 20);
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // sends, then an abort frame
    w.u8(7).u8(2).u16(64);
    w.u8(7).u8(3).u16(0);
    w.u8(4).u8(1).u8(0).u8(2).short_text("rank 1: something broke");
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // goodbye with a receive pending
    post(w, 0, 8);
    w.u8(5);
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // a header announcing a huge message, then a little of it
    w.u8(2).u8(64).u8(0).u8(0).u64(uint64_t{1} << 40).u16(100);
    read(w);
    write("tcp_frames", w);
  }
  {
    ByteWriter w;  // a frame header with a bad magic, as raw bytes
    tcp::FrameHeader header;
    header.magic = 0x12345678;
    tcp::EncodedHeader bytes = tcp::encode_header(header);
    w.u8(3).u16(bytes.size()).bytes(bytes);
    read(w);
    write("tcp_frames", w);
  }
}

// ------------------------------------------------------------ shm_channel

void shm_channel() {
  auto post = [](ByteWriter& w, int tag, int size) { w.u8(0).u8(tag).u8(0).u16(size); };
  auto send = [](ByteWriter& w, int tag, int size) { w.u8(1).u8(tag).u8(0).u16(size).u8(5); };
  auto pull = [](ByteWriter& w, int tag, int size, int slot) { w.u8(2).u8(tag).u8(0).u16(size).u8(slot).u8(0); };
  auto progress = [](ByteWriter& w) { w.u8(5); };
  {
    ByteWriter w;
    w.u8(0);  // the channel pulls, the peer pulls
    post(w, 0, 100);
    send(w, 0, 100);
    progress(w);
    send(w, 1, 2500);
    progress(w);
    post(w, 1, 2500);
    progress(w);
    write("shm_channel", w);
  }
  {
    ByteWriter w;
    w.u8(0);
    post(w, 2, 1000);
    pull(w, 2, 1000, 3);
    pull(w, 3, 600, 4);
    progress(w);
    post(w, 3, 600);
    progress(w);
    w.u8(8);
    write("shm_channel", w);
  }
  {
    ByteWriter w;  // the channel's own sends: eager and pulled
    w.u8(0);
    w.u8(7).u8(0).u16(100);
    w.u8(7).u8(1).u16(2000);
    w.u8(8);
    progress(w);
    w.u8(8);
    write("shm_channel", w);
  }
  {
    ByteWriter w;  // goodbye, then an abort, then a hang-up
    w.u8(3);
    post(w, 0, 10);
    w.u8(6).u8(0);
    w.u8(6).u8(1).u8(2).u8(1).short_text("rank 1: timed out");
    w.u8(10);
    write("shm_channel", w);
  }
  {
    ByteWriter w;  // a record with a length beyond the ring
    w.u8(0);
    w.u8(3).u8(8).u8(1).u8(0).u16(100).u64(0).u16(16).bytes(as_bytes("0123456789abcdef")).u64(1u << 20);
    progress(w);
    write("shm_channel", w);
  }
}

// ------------------------------------------------------------ addresses

void published_address() {
  tcp::ListenerAddress v4;
  sockaddr_in in4{};
  in4.sin_family = AF_INET;
  in4.sin_addr.s_addr = htonl(0x0a000003);
  in4.sin_port = htons(41234);
  v4.socket = tcp::SocketAddress(reinterpret_cast<sockaddr*>(&in4), sizeof(in4));
  v4.nonce = 0x1122334455667788ull;
  v4.rank = 3;
  v4.streams = 2;
  tcp::ListenerAddress v6 = v4;
  sockaddr_in6 in6{};
  in6.sin6_family = AF_INET6;
  in6.sin6_addr.s6_addr[15] = 1;
  in6.sin6_port = htons(5000);
  in6.sin6_scope_id = 2;
  v6.socket = tcp::SocketAddress(reinterpret_cast<sockaddr*>(&in6), sizeof(in6));
  shm::ShmAddress shared = shm::this_process_address();
  shared.nonce = 77;
  shared.ring_bytes = 1 << 20;
  shared.socket_token[0] = std::byte{0xab};

  PublishedAddress address;
  address.host_id = 0xfeedbeef;
  address.machine_id = 0xabad1dea;
  address.cpus = {0xff, 0x1};
  address.host_name = "node-7";
  address.sections.push_back({"shm", shm::encode_address(shared)});
  address.sections.push_back({"tcp", tcp::encode_address(v4)});
  write_bytes("published_address", 0, encode_published_address(address));
  address.sections.clear();
  write_bytes("published_address", 0, encode_published_address(address));
  write_bytes("published_address", 1, tcp::encode_address(v4));
  write_bytes("published_address", 1, tcp::encode_address(v6));
  write_bytes("published_address", 2, shm::encode_address(shared));
}

void ipc_descriptor() {
  cuda_ipc::IpcDescriptor descriptor;
  for (size_t i = 0; i < descriptor.handle.size(); ++i) descriptor.handle[i] = static_cast<unsigned char>(i);
  descriptor.base = 0x7f1200000000ull;
  descriptor.buffer_id = 9;
  descriptor.allocation_bytes = 64 << 20;
  descriptor.offset = 4 << 20;
  descriptor.length = 16 << 20;
  const auto bytes = cuda_ipc::encode_descriptor(descriptor);
  write("ipc_descriptor", std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                               reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size()));
  descriptor.length = descriptor.allocation_bytes - descriptor.offset;
  const auto edge = cuda_ipc::encode_descriptor(descriptor);
  write("ipc_descriptor", std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(edge.data()),
                                               reinterpret_cast<const uint8_t*>(edge.data()) + edge.size()));
}

void abort_report() {
  for (uint64_t error_class : {0, 1, 2, 3, 4, 5, 9}) {
    ByteWriter w;
    w.u64(error_class).u64(error_class == 1 ? 2 : ~uint64_t{0}).u8(0).u8(1).u8(0).text("rank 1: peer rank 2 went away");
    write("abort_report", w);
  }
  ByteWriter w;
  w.u64(1).u64(uint64_t{1} << 32).u8(0).u8(1).u8(255).text(std::string(300, 'x'));
  write("abort_report", w);
}

void shm_side_messages() {
  auto save = [](const std::vector<std::byte>& bytes) {
    write("shm_side_messages", std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                    reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size()));
  };
  save(shm::encode_hello({.listener_nonce = 5, .dialer_rank = 1, .listener_rank = 0, .probe_address = 4096,
                          .probe_value = 9}));
  save(shm::encode_ack({.listener_rank = 0, .dialer_rank = 1, .ring_bytes = 1 << 20, .probe_address = 8192,
                        .probe_value = 3, .listener_pulls = 1}));
  save(shm::encode_confirm({.dialer_pulls = 1}));
  save(shm::encode_goodbye());
  save(shm::encode_abort({.error_class = 1, .blamed_rank = 2, .text = "rank 2: gone"}));
  save(shm::encode_probe(shm::SideKind::probe, {.number = 7, .group = 0x1234}));
  save(shm::encode_probe(shm::SideKind::probe_answer, {.number = 7, .group = 0x1234, .position = (uint64_t{1} << 63) | 12}));
}

// ------------------------------------------------------------ TcpStore

void tcp_store_request() {
  using tcp_store::Op;
  std::vector<std::byte> stream;
  auto add = [&](Op op, std::vector<std::string> keys, std::vector<std::byte> value) {
    auto request = tcp_store::encode_request(op, keys, value);
    std::vector<uint8_t> alone(reinterpret_cast<const uint8_t*>(request.data()),
                               reinterpret_cast<const uint8_t*>(request.data()) + request.size());
    write("tcp_store_request", alone);
    stream.insert(stream.end(), request.begin(), request.end());
  };
  add(Op::set, {"job/rank/0"}, as_bytes("address"));
  add(Op::get, {"a", "b", "c"}, {});
  add(Op::wait, {"a"}, {});
  std::vector<std::byte> delta;
  tcp_store::put_u64(delta, 5);
  add(Op::add, {"counter"}, delta);
  add(Op::remove, {"a"}, {});
  add(Op::cancel, {}, {});
  write("tcp_store_request", std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(stream.data()),
                                                  reinterpret_cast<const uint8_t*>(stream.data()) + stream.size()));
}

void tcp_store_server() {
  // step: connection u8 | kind u8 (0: well-formed) | op u8 (set 0, get 1, wait 2, add 3, remove 4, cancel 5) ...
  auto set = [](ByteWriter& w, int c, char key, std::string_view value) {
    w.u8(c).u8(0).u8(0).u8(key - 'a').u8(1).u8(value.size()).text(value);
  };
  auto get = [](ByteWriter& w, int c, std::string_view keys) {
    w.u8(c).u8(0).u8(1).u8(keys.size());
    for (char key : keys) w.u8(key - 'a');
  };
  {
    ByteWriter w;  // a parked get answered by a set on another connection
    get(w, 0, "ab");
    set(w, 1, 'a', "1");
    set(w, 2, 'b', "2");
    get(w, 1, "ba");
    write("tcp_store_server", w);
  }
  {
    ByteWriter w;  // add, counters, remove
    w.u8(0).u8(0).u8(3).u8(2).u8(0).u8(5);
    w.u8(0).u8(0).u8(3).u8(2).u8(1).u64(~uint64_t{0});
    set(w, 1, 'd', "x");
    w.u8(1).u8(0).u8(3).u8(3).u8(0).u8(1);
    w.u8(2).u8(0).u8(4).u8(2);
    write("tcp_store_server", w);
  }
  {
    ByteWriter w;  // wait, cancel, then a request split in two, then garbage
    w.u8(0).u8(0).u8(2).u8(1).u8(3);
    w.u8(0).u8(0).u8(5);
    w.u8(1).u8(1).u8(0).u8(0).u8(1).u8(3).text("abc").u16(7);
    w.u8(2).u8(2).u8(4).text("GET ");
    write("tcp_store_server", w);
  }
}

void tcp_store_client() {
  // call u8 [keys u8] | delta u8 | scripts u8 | per script: flags u8 | reply...
  auto reply = [](ByteWriter& w, int status, std::vector<std::string> items) {
    w.u8(0).u8(status).u8(items.size());
    for (const auto& item : items) w.u8(item.size()).text(item).u8(0);
  };
  for (int call = 0; call < 6; ++call) {
    ByteWriter w;
    w.u8(call);
    if (call == 2 || call == 3) w.u8(1);
    w.u8(3).u8(0).u8(0);
    if (call == 1) reply(w, 0, {"value"});
    else if (call == 2) reply(w, 0, {"v1", "v2"});
    else if (call == 4) reply(w, 0, {std::string(8, '\0')});
    else if (call == 5) reply(w, 0, {std::string(1, '\1')});
    else reply(w, 0, {});
    write("tcp_store_client", w);
  }
  {
    ByteWriter w;  // an error reply
    w.u8(4).u8(1).u8(0).u8(0);
    reply(w, 2, {"not a counter"});
    write("tcp_store_client", w);
  }
  {
    ByteWriter w;  // a get whose connection breaks, answered on the second
    w.u8(1).u8(1).u8(1);
    w.u8(0).u8(2).u8(0).u8(1).u8(4).text("abcd").u8(0).u16(10);  // cut after 10 bytes, then hung up
    w.u8(0);
    reply(w, 0, {"late"});
    write("tcp_store_client", w);
  }
  {
    ByteWriter w;  // a get that times out, and the cancel's answer
    w.u8(1).u8(1).u8(0);
    w.u8(3).u8(3).u8(0);
    reply(w, 1, {"a"});
    write("tcp_store_client", w);
  }
}

// ------------------------------------------------------------ text

void store_url() {
  for (const char* url : {"tcp://10.0.0.1:29500", "tcp://[fd00::2]:5000", "tcp://host:1", "file:///shared/rdv",
                          "redis://127.0.0.1:6379", "redis://:secret@redis.example:6380/2", "redis://[::1]/15",
                          "redis://host", "tcp://host", "http://x:1", "tcp://:5", "redis://user@h:1"})
    write_text("store_url", url);
}

void launch_env() {
  // variable index u8 | value (u8 length + bytes); the indices of launch_env.cc's tables.
  auto env = [](std::vector<std::pair<int, std::string>> variables) {
    ByteWriter w;
    for (const auto& [index, value] : variables) w.u8(index).short_text(value);
    write("launch_env", w);
  };
  env({{0, "1"}, {1, "4"}, {2, "tcp://h:29500"}, {13, "job-1"}});
  env({{3, "2"}, {4, "8"}, {5, "10.0.0.1"}, {6, "29500"}, {14, "run-7"}});
  env({{3, "0"}, {4, "2"}, {5, "fd00::1"}, {6, "1"}});
  env({{7, "3"}, {8, "4"}, {2, "redis://r:6379"}, {15, "ns"}});
  env({{9, "0"}, {10, "1"}, {5, "a"}, {6, "65535"}});
  env({{11, "5"}, {12, "6"}, {2, "file:///x"}, {16, "1234"}, {17, "0"}});
  env({{18, "shm, tcp"}, {21, "4"}, {22, "50"}, {23, "local:alpha_us=1,gbps=8;remote:gbps=0.125"},
       {24, "allreduce:ring,broadcast:binomial"}, {25, "0"}, {19, "eth0"}, {20, "h0"}});
  env({{0, "1"}, {1, "x"}});
  env({{23, "alpha_us=25,gbps=2"}, {24, "allreduce:nope"}});
  env({{23, "remote:alpha_us=2.5e-3, gbps=1e2;local:gbps=0x1p4"}});
}

void redis_reply() {
  for (const char* resp : {"+OK\r\n", "$5\r\nvalue\r\n", "$-1\r\n", ":1\r\n", ":-3\r\n", "-ERR value is not an integer\r\n",
                           "*3\r\n$1\r\na\r\n$-1\r\n$0\r\n\r\n", "*2\r\n$1\r\n0\r\n*2\r\n$4\r\nns/a\r\n$4\r\nns/b\r\n",
                           "*2\r\n$3\r\n123\r\n*1\r\n:5\r\n", "*-1\r\n", "*0\r\n", "$3\r\nab"})
    write_text("redis_reply", resp);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus <directory>\n");
    return 2;
  }
  root = argv[1];
  ::mkdir(root.c_str(), 0755);
  tcp_frames();
  shm_channel();
  published_address();
  abort_report();
  ipc_descriptor();
  shm_side_messages();
  tcp_store_request();
  tcp_store_server();
  tcp_store_client();
  store_url();
  launch_env();
  redis_reply();
  return 0;
}
