"""Turns the Markdown output of `swift package benchmark` into the ratio tables of
docs/performance.md. Every benchmark iteration does a fixed number of operations (see the
benchmark sources), so the p50 of an iteration divided by that number is the time per call."""

import re
import sys

# Operations per iteration: 1,000 calls. The thread benchmarks record a ratio instead.
OPERATIONS = 1_000


def parse(path):
    """Returns {benchmark name: {metric: p50}} from the benchmark tool's Markdown output."""
    results, name = {}, None
    for line in open(path, encoding="utf-8"):
        if line.startswith("### "):
            name = line[4:].strip()
            results[name] = {}
        elif name and line.startswith("| ") and not line.startswith("| Metric"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            metric = re.sub(r"\s*\*$", "", cells[0])
            value = float(cells[3].replace(",", ""))
            # The tool scales large values and says so in the metric's name: "ratio (K)".
            scaled = re.match(r"(.*) \((K|M)\)$", metric)
            if scaled:
                metric, value = scaled.group(1), value * (1_000 if scaled.group(2) == "K" else 1_000_000)
            results[name][metric] = value
    return results


def row(*cells):
    print("| " + " | ".join(cells) + " |")


def ratio_table(results, subject, goal, rows, calls, unit, scale):
    """Prints a table of `subject` against a baseline per row: (label, subject benchmark,
    baseline benchmark, baseline label, goal). Times are per call, in `unit` (ns / `scale`)."""

    def time(name):
        return results[name]["Time (wall clock) (ns)"] / calls

    row("operation", subject, "baseline", "baseline time", "ratio", goal)
    row("---", "---:", "---", "---:", "---:", "---")
    for label, measured, baseline, base_label, target in rows:
        if measured in results and baseline in results:
            row(label, f"{time(measured) / scale:.1f} {unit}", base_label, f"{time(baseline) / scale:.1f} {unit}",
                f"{time(measured) / time(baseline):.2f}×", target)


def main(path):
    results = parse(path)

    def mallocs(name):
        return results[name]["Malloc (total)"] / OPERATIONS

    print("### Memory tier: one thread")
    print()
    ratio_table(results, "MemoryCache", "target", [
        ("get hit, String key", "get hit, String key: MemoryCache",
         "get hit, String key: Mutex<Dictionary>", "Mutex<[String: Int]>", "≤ 1.5×"),
        ("get hit, Int key", "get hit, Int key: MemoryCache",
         "get hit, Int key: Mutex<Dictionary>", "Mutex<[Int: Int]>", "≤ 1.5×"),
        ("get hit, String key", "get hit, String key: MemoryCache",
         "get hit, String key: NSCache", "NSCache (Foundation)", "report"),
        ("set existing key, String key", "set existing key, String key: MemoryCache",
         "set existing key, String key: Mutex<Dictionary>", "Mutex<[String: Int]>", "report"),
    ], OPERATIONS, "ns", 1)
    print()

    print("### Memory tier: two threads")
    print()
    row("subject", "throughput of 2 threads / 1 thread (p50)", "target")
    row("---", "---:", "---")
    name = "get hits, 2 threads against 1, String key"
    for subject, metric, target in [
        ("MemoryCache", "MemoryCache × 1000", "≥ 1.5×"),
        ("Mutex<Dictionary>", "Mutex<Dictionary> × 1000", "(baseline: one lock)"),
        ("private Dictionary per thread", "ceiling × 1000", "(ceiling: nothing shared)"),
    ]:
        if name in results and metric in results[name]:
            row(subject, f"{results[name][metric] / 1000:.2f}×", target)
    print()

    print("### Memory tier: allocations")
    print()
    row("operation", "mallocs per call")
    row("---", "---:")
    for name in [
        "get hit, String key: MemoryCache",
        "get hit, Int key: MemoryCache",
        "set existing key, String key: MemoryCache",
        "set new key evicting, String key: MemoryCache",
    ]:
        if name in results:
            row(name.replace(": MemoryCache", ""), f"{mallocs(name):.3f}")
    print()


def disk(results):
    """The disk tier's tables: every DiskCache benchmark iteration does 100 calls."""
    per = 100

    if not any(name.endswith(": DiskCache") for name in results):
        return
    print("### Disk tier")
    print()
    ratio_table(results, "DiskCache", "goal", [
        ("warm get, 32 KiB", "get 32 KiB, 1,000 entries: DiskCache",
         "get 32 KiB: open, fstat, read, close", "open, fstat, read, close", "≤ 1.4×"),
        ("set, 32 KiB, no fsync", "set 32 KiB, 1,000 entries: DiskCache",
         "set 32 KiB: write to a temporary name, rename", "write to a temporary name, rename", "≤ 1.5×"),
        ("get, 1 KB", "get 1 KB, 100,000 entries: DiskCache",
         "get 1 KB, 1,000 entries: DiskCache", "the same at 1,000 entries", "≤ 1.3×"),
        ("set, 1 KB", "set 1 KB, 100,000 entries: DiskCache",
         "set 1 KB, 1,000 entries: DiskCache", "the same at 1,000 entries", "≤ 1.3×"),
        ("get, 32 KiB (URLCache)", "get 32 KiB, 1,000 entries: URLCache",
         "get 32 KiB, 1,000 entries: DiskCache", "DiskCache", "report"),
        ("set, 32 KiB (naive cache)", "set 32 KiB, 1,000 entries: naive cache",
         "set 32 KiB, 1,000 entries: DiskCache", "DiskCache", "report"),
    ], per, "µs", 1000)
    same_iteration = [
        ("warm get, 32 KiB, against open, fstat, read, close",
         "get 32 KiB against raw POSIX, same iteration: DiskCache", "≤ 1.4×"),
        ("warm get, 32 KiB, against open, read of a known size, close (no fstat)",
         "get 32 KiB against raw POSIX of a known size, same iteration: DiskCache", "report"),
        ("set, 32 KiB, against a write to a temporary name and rename",
         "set 32 KiB against raw POSIX, same iteration: DiskCache", "≤ 1.5×"),
    ]
    if any(name in results for _, name, _ in same_iteration):
        print()
        same_iteration_table(results, same_iteration)
    name = "open, 100,000 entries: DiskCache"
    if name in results:
        print()
        row("operation", "time (p50)", "goal")
        row("---", "---:", "---")
        row("open a cache of 100,000 entries", f"{results[name]['Time (wall clock) (ns)'] / 1e6:.0f} ms", "< 200 ms")
    print()


def same_iteration_table(results, rows):
    """Prints the ratios that benchmarks recorded in one iteration: (label, benchmark, goal)."""
    row("measured in one iteration, alternating order (p50)", "ratio", "goal")
    row("---", "---:", "---")
    for label, name, goal in rows:
        if name in results:
            row(label, f"{results[name]['ratio × 1000'] / 1000:.2f}×", goal)


def loader(results):
    """The loader's tables: ratios measured in one iteration, and times per 10 loads."""
    same_iteration = [
        ("memory hit through the loader, against a MemoryCache get",
         "memory hit through the loader against a MemoryCache get, same iteration", "≤ 3×"),
        ("the same, against a MemoryCache get with its key built from the request",
         "memory hit through the loader against a MemoryCache get keyed from the request, same iteration", "report"),
        ("fresh disk hit through the loader (no memory tier), against a DiskCache get",
         "fresh disk hit through the loader against a DiskCache get, same iteration", "≤ 1.3×"),
        ("the same, with the answer's head read (its fields decoded)",
         "fresh disk hit with its head read through the loader against a DiskCache get, same iteration", "report"),
        ("miss from the loopback origin, its answer, against the same request through the transport",
         "miss answered, its disk write settled before the next, against the transport alone, same iteration",
         "≤ 1.2×"),
        ("the same with no disk tier (nothing written)",
         "miss answered with no disk tier, settled before the next, against the transport alone, same iteration",
         "report"),
        ("the first against the transport with a plain file written after each answer, untimed",
         "miss answered, its disk write settled before the next, against the transport with a plain file written after each, same iteration",
         "report"),
        ("the first with 20 ms idle after each load, on both sides",
         "miss answered, its disk write settled and 20 ms idle before the next, against the transport alone, same iteration",
         "report"),
        ("the same with no disk tier",
         "miss answered with no disk tier, settled and 20 ms idle before the next, against the transport alone, same iteration",
         "report"),
        ("10 misses back to back, each one's disk write overlapping the next loads",
         "miss from the loopback origin against the transport alone, same iteration", "report"),
        ("10 misses back to back with no disk tier (nothing written after answering)",
         "miss stored in memory only against the transport alone, same iteration", "report"),
    ]
    if not any(name in results for _, name, _ in same_iteration):
        return
    print("### Loader")
    print()
    same_iteration_table(results, same_iteration)
    ours = "10 loads of a stored URL: ResourceLoader"
    theirs = "10 loads of a stored URL: URLSession with URLCache"
    if ours in results and theirs in results:
        print()
        row("10 loads of a stored 32 KiB URL (p50)", "time", "against ResourceLoader")
        row("---", "---:", "---:")
        base = results[ours]["Time (wall clock) (ns)"]
        for label, name in [("ResourceLoader", ours), ("URLSession with URLCache (Linux)", theirs)]:
            time = results[name]["Time (wall clock) (ns)"]
            row(label, f"{time / 1000:.1f} µs", f"{time / base:.0f}×")
    print()


def images(results):
    """The image tables: the thumbnail's ratio to a full decode, and decoding throughput."""
    ratio = "256-pixel thumbnail of a 4000x3000 JPEG against a full decode and resize, same iteration"
    timed = [
        ("decode a 4000 × 3000 JPEG", "decode a 4000x3000 JPEG (12 megapixels)", 12),
        ("decode a 4000 × 3000 PNG", "decode a 4000x3000 PNG (12 megapixels)", 12),
        ("256-pixel thumbnail of a 4000 × 3000 JPEG", "256-pixel thumbnail of a 4000x3000 JPEG", 12),
        ("256-pixel thumbnail of a 4000 × 3000 progressive JPEG",
         "256-pixel thumbnail of a 4000x3000 progressive JPEG", 12),
    ]
    if ratio not in results and not any(name in results for _, name, _ in timed):
        return
    print("### Images")
    print()
    same_iteration_table(results, [
        ("256-pixel thumbnail of a 4000 × 3000 JPEG, against a full decode and the same resize", ratio, "≤ 0.25×"),
        ("the same, progressive JPEG (against its own full decode)",
         "256-pixel thumbnail of a 4000x3000 progressive JPEG against a full decode and resize, same iteration",
         "report"),
    ])
    print()
    row("work (p50)", "time", "megapixels of source a second")
    row("---", "---:", "---:")
    for label, name, megapixels in timed:
        if name in results:
            time = results[name]["Time (wall clock) (ns)"]
            row(label, f"{time / 1e6:.1f} ms", f"{megapixels / (time / 1e9):.0f}")
    print()


if __name__ == "__main__":
    main(sys.argv[1])
    disk(parse(sys.argv[1]))
    loader(parse(sys.argv[1]))
    images(parse(sys.argv[1]))
