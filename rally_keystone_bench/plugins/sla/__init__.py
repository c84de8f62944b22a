"""Rally SLA plugins: latency_slope."""
