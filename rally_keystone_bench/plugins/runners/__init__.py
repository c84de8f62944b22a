"""Rally runner plugins: pooled_rps."""
