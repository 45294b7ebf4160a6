"""Benchmarks of prtriage on a synthetic repository at the real scale of radixark/miles."""
