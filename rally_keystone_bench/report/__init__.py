"""Summary reports rendered from Rally results, and the Rally exporter."""
