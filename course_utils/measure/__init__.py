"""Measurement and records: benchmarks, recorded runs, generation timing, block comparison."""
