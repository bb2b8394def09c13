// chorus-store: a standalone TcpStoreServer, for jobs whose rendezvous should
// not live inside rank 0 (CHORUS_STORE=tcp://host:port pointing here).
// Serves until SIGINT or SIGTERM. Clients must prove the job secret given
// in CHORUS_SECRET or CHORUS_SECRET_FILE (the same the ranks get).
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "base/config.h"
#include "base/error.h"
#include "base/log.h"
#include "rendezvous/store.h"
#include "rendezvous/tcp_store.h"
#include "tools/flag_checks.h"
#include "base/version.h"

int main(int argc, char** argv) {
  CLI::App app{"chorus-store: serve a chorus TcpStore for rendezvous until SIGINT/SIGTERM"};
  app.set_version_flag("--version", std::string("chorus-store ") + chorus::version());
  std::string host;
  uint16_t port = 0;
  // No default address: a store on every address by omission is an open
  // door (docs/security.md). The caller says which doors to open.
  app.add_option("--host", host,
                 "address to listen on: 127.0.0.1 for ranks on this host, this host's address the ranks reach for "
                 "a job across hosts, or 0.0.0.0 / :: for every address")
      ->required();
  app.add_option("--port", port, "TCP port (default 0: pick a free one and print it)");
  CLI11_PARSE(app, argc, argv);

  // Block the signals before the server starts its thread, so the thread
  // inherits the mask and sigwait() below is the only place they arrive.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    if (const std::string problem = chorus::tools::environment_problem(); !problem.empty())
      throw chorus::InvalidArgument(problem);
    chorus::TcpStoreServerOptions options;
    options.host = host;
    options.port = port;
    options.secret = chorus::secret_from_environment();
    options.tls = chorus::tls_from_environment();
    if (!options.secret.configured() && chorus::Config::from_environment().require_secret)
      throw chorus::InvalidArgument("CHORUS_REQUIRE_SECRET=1 but there is no CHORUS_SECRET or CHORUS_SECRET_FILE");
    // The server's own error names the address; the flags to change are ours to name.
    std::unique_ptr<chorus::TcpStoreServer> server;
    try {
      server = std::make_unique<chorus::TcpStoreServer>(options);
    } catch (const chorus::IoError& error) {
      throw chorus::IoError(chorus::cat("--host ", host, " --port ", port, ": ", error.what()));
    }
    if (!options.secret.configured())
      std::cerr << "chorus-store: no CHORUS_SECRET or CHORUS_SECRET_FILE: any client that reaches this port may "
                   "read and write the job's keys"
                << std::endl;
    std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
    // Launchers wait for this line (std::endl flushes it) before starting ranks.
    std::cout << "chorus-store listening on " << shown << ":" << server->port() << std::endl;
    int received = 0;
    sigwait(&stop_signals, &received);
    std::cout << "chorus-store: stopping (" << (received == SIGINT ? "SIGINT" : "SIGTERM") << ")" << std::endl;
  } catch (const chorus::Error& error) {
    std::cerr << "chorus-store: " << error.what() << std::endl;
    return 1;
  }
  return 0;
}
