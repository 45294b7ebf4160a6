"""A synthetic twin of radixark/miles: validator, extra-args provider, CI scripts, model files."""
