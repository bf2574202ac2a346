"""The benchmark harness: `python -m benchmarks [--smoke] [--out FILE]` (docs/performance.md)."""
