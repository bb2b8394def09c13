#!/usr/bin/env python3
"""What TLS costs on TCP pairs: chorus-bench over tcp with and without
CHORUS_TLS_*, alternating run by run on the same machine, so both see the
same noise. Prints, per size, the median time of each and the ratio
(TLS / plain: 1.0 = free, 2.0 = twice as slow) as a Markdown table.

  benchmarks/tls/tls_cost.py BUILD_DIR CERT_DIR [--op allreduce] [--ranks 2] [--rounds 5]

CERT_DIR holds rank.pem, rank.key and ca.pem (test/tls/make_certificates.sh
makes them; a Meson build leaves them in BUILD_DIR/test/tls)."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile


def run(bench, args, env, json_path):
    subprocess.run([bench, *args, "--json", json_path], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(json_path) as f:
        return {row["bytes"]: row for row in json.load(f)["rows"]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("build")
    parser.add_argument("certificates")
    parser.add_argument("--op", default="allreduce")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-bytes", default="4K")
    parser.add_argument("--max-bytes", default="256M")
    options = parser.parse_args()
    bench = os.path.join(options.build, "benchmarks", "chorus-bench")
    args = ["-n", str(options.ranks), "--transport", "tcp", "--op", options.op, "-b", options.min_bytes,
            "-e", options.max_bytes, "-f", "8", "--time-budget-ms", "300", "--check"]
    plain_env = {k: v for k, v in os.environ.items() if not k.startswith("CHORUS_TLS_")}
    tls_env = dict(plain_env,
                   CHORUS_TLS_CERT=os.path.join(options.certificates, "rank.pem"),
                   CHORUS_TLS_KEY=os.path.join(options.certificates, "rank.key"),
                   CHORUS_TLS_CA=os.path.join(options.certificates, "ca.pem"))
    times = {"plain": {}, "tls": {}}
    wrong = 0
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "rows.json")
        for _ in range(options.rounds):
            for name, env in (("plain", plain_env), ("tls", tls_env)):
                for size, row in run(bench, args, env, path).items():
                    times[name].setdefault(size, []).append(row["time_us"])
                    wrong += row["wrong"] or 0
    print(f"{options.op}, {options.ranks} ranks over tcp, median of {options.rounds} alternating runs each, "
          f"every result checked ({wrong} wrong)\n")
    print("| bytes | plain (us) | TLS (us) | plain busbw GB/s | TLS busbw GB/s | TLS / plain time |")
    print("|---:|---:|---:|---:|---:|---:|")
    factor = 2 * (options.ranks - 1) / options.ranks if options.op == "allreduce" else 1.0
    for size in sorted(times["plain"]):
        plain = statistics.median(times["plain"][size])
        tls = statistics.median(times["tls"][size])
        print(f"| {size} | {plain:.1f} | {tls:.1f} | {size / plain / 1e3 * factor:.3f} | "
              f"{size / tls / 1e3 * factor:.3f} | {tls / plain:.2f} |")


if __name__ == "__main__":
    main()
