#include "adapters/torch/store_bridge.h"

#include <cstring>
#include <exception>
#include <utility>

#include "api/launch_config.h"
#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store_url.h"

namespace chorus::torch_backend {

namespace {

std::string joined(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) text += (text.empty() ? "'" : ", '") + key + "'";
  return text;
}

std::vector<uint8_t> to_torch(std::span<const std::byte> bytes) {
  std::vector<uint8_t> value(bytes.size());
  if (!bytes.empty()) std::memcpy(value.data(), bytes.data(), bytes.size());
  return value;
}

std::vector<std::byte> to_chorus(const std::vector<uint8_t>& value) {
  std::vector<std::byte> bytes(value.size());
  if (!value.empty()) std::memcpy(bytes.data(), value.data(), value.size());
  return bytes;
}

}  // namespace

TorchStore::TorchStore(c10::intrusive_ptr<c10d::Store> store, int rank) : store_(std::move(store)), rank_(rank) {}

// torch's stores throw c10::Error (a TCPStore's peer gone, a timeout); the
// bootstrap and everything above it expect chorus's errors, naming this rank.
void TorchStore::set(const std::string& key, std::span<const std::byte> value) {
  try {
    store_->set(key, to_torch(value));
  } catch (const chorus::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw IoError(cat("rank ", rank_, ": torch's store could not set '", key, "': ", error.what()));
  }
}

std::vector<std::byte> TorchStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  // c10d's get() waits with the store's own timeout; ours is per call.
  wait({key}, timeout);
  try {
    return to_chorus(store_->get(key));
  } catch (const chorus::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw IoError(cat("rank ", rank_, ": torch's store could not get '", key, "': ", error.what()));
  }
}

void TorchStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  try {
    // A zero timeout is "look once" to chorus (the bootstrap asks so to name
    // the ranks missing after a timeout) but "wait forever" to c10d.
    if (timeout.count() <= 0) {
      if (!store_->check(keys)) throw TimeoutError(cat("rank ", rank_, ": ", joined(keys), " not in torch's store"));
      return;
    }
    store_->wait(keys, timeout);
  } catch (const chorus::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw TimeoutError(cat("rank ", rank_, ": waited ", timeout.count(), " ms in torch's store for ", joined(keys),
                           " (the ranks that write them have not joined): ", error.what()));
  }
}

int64_t TorchStore::add(const std::string& key, int64_t delta) {
  try {
    return store_->add(key, delta);
  } catch (const chorus::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw IoError(cat("rank ", rank_, ": torch's store could not add to '", key, "': ", error.what()));
  }
}

bool TorchStore::remove(const std::string& key) {
  try {
    return store_->deleteKey(key);
  } catch (const chorus::Error&) {
    throw;
  } catch (const std::exception& error) {
    throw IoError(cat("rank ", rank_, ": torch's store could not delete '", key, "': ", error.what()));
  }
}

LauncherStore::LauncherStore(std::shared_ptr<chorus::Store> store, std::shared_ptr<void> keep_alive,
                             std::chrono::milliseconds timeout)
    : c10d::Store(timeout), store_(std::move(store)), keep_alive_(std::move(keep_alive)) {}

void LauncherStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(key, to_chorus(value));
}

std::vector<uint8_t> LauncherStore::get(const std::string& key) { return to_torch(store_->get(key, timeout_)); }

int64_t LauncherStore::add(const std::string& key, int64_t value) { return store_->add(key, value); }

bool LauncherStore::deleteKey(const std::string& key) { return store_->remove(key); }

bool LauncherStore::check(const std::vector<std::string>& keys) {
  // chorus's stores look once when the timeout is zero.
  try {
    store_->wait(keys, std::chrono::milliseconds(0));
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

int64_t LauncherStore::getNumKeys() {
  // Not part of chorus's Store (Redis and shared directories hold other jobs'
  // keys too); torch's collectives and init_process_group never ask.
  throw InvalidArgument("chorus.torch: the store of chorus's launcher cannot count its keys (getNumKeys)");
}

void LauncherStore::wait(const std::vector<std::string>& keys) { store_->wait(keys, timeout_); }

void LauncherStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  store_->wait(keys, timeout);
}

#if CHORUS_TORCH_STORE_HAS_CLONE
c10::intrusive_ptr<c10d::Store> LauncherStore::clone() {
  return c10::make_intrusive<LauncherStore>(store_, keep_alive_, timeout_);
}
#endif

LaunchedStore open_launcher_store(std::chrono::milliseconds timeout) {
  // The launcher's variables and the job's secret and TLS, read as connect_from_env reads them.
  const detail::LaunchConfig read = detail::read_launch_config(ConnectOptions{}, "chorus.torch rendezvous");
  const LaunchEnv& launch = read.launch;
  const Config& config = read.config;
  // The job id namespace keeps torch's keys apart from those of other jobs
  // (and of chorus Contexts of this job) at the same store.
  // Without a job id, file:// and Redis refuse (keys outlive the job) and
  // tcp:// is one job's own server.
  std::string job_id = launch.job_id.empty() ? "" : launch.job_id + "/torch";
  if (job_id.empty() && parse_store_url(launch.store).scheme == "tcp") job_id = "torch";
  OpenedStore opened = open_store(launch.store, launch.rank, job_id, timeout, config.secret, config.tls);
  LaunchedStore result;
  result.store = c10::make_intrusive<LauncherStore>(std::move(opened.store), std::move(opened.keep_alive), timeout);
  result.rank = launch.rank;
  result.size = launch.size;
  return result;
}

}  // namespace chorus::torch_backend
