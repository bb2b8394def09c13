#!/usr/bin/python3
"""Reads the chorus-bench / gloo-bench / mpi-bench tables that compare.sh saved
(one file per library and collective, named LIBRARY.OP.txt) and prints, per
collective and size, our busbw and its ratio to each peer, plus the 8-byte
latency ratio (ours / peer's time: < 1 means we are faster). For Gloo, every
algorithm's table is read and the best busbw per size is the peer."""
import collections, glob, os, sys


def read_tables(path):
    """{size: (time_us, busbw)}, best busbw over all tables in the file."""
    best = {}
    for line in open(path):
        fields = line.split()
        if not fields or line.startswith('#') or len(fields) < 9 or fields[5] == 'unsupported':
            continue
        size, time_us, busbw = int(fields[0]), float(fields[5]), float(fields[7])
        if size not in best or time_us < best[size][0]:
            best[size] = (time_us, busbw)
    return best


def main(directory):
    files = collections.defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(directory, '*.*.txt'))):
        library, op, _ = os.path.basename(path).rsplit('.', 2)
        files[op][library] = read_tables(path)
    for op, libraries in files.items():
        ours = libraries.get('chorus')
        if not ours:
            continue
        peers = [name for name in libraries if name != 'chorus']
        print(f'\n## {op}: chorus busbw (GB/s) and ratio chorus/peer (busbw; > 1 = chorus faster)')
        print(f"{'size(B)':>10} {'chorus':>8}" + ''.join(f' {p:>10} {"ratio":>6}' for p in peers))
        for size in sorted(ours):
            row = f'{size:>10} {ours[size][1]:>8.3f}'
            for peer in peers:
                theirs = libraries[peer].get(size)
                if theirs is None:
                    row += f" {'-':>10} {'-':>6}"
                else:
                    # Same bytes and bus factor: the busbw ratio is the inverse time ratio, exact even
                    # where the printed busbw rounds to 0.000.
                    ratio = theirs[0] / ours[size][0]
                    row += f' {theirs[1]:>10.3f} {ratio:>6.2f}'
            print(row)
        common = [s for s in ours if all(s in libraries[p] for p in peers)]
        smallest = min(common or ours)
        line = f'latency at {smallest} B: chorus {ours[smallest][0]:.1f} us'
        for peer in peers:
            theirs = libraries[peer].get(smallest)
            if theirs:
                line += f'; {peer} {theirs[0]:.1f} us (chorus/{peer} = {ours[smallest][0] / theirs[0]:.2f})'
        print(line)


if __name__ == '__main__':
    main(sys.argv[1])
