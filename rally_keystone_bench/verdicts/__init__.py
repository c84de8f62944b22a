"""The verdict layer: pure judging and statistics, no Rally, oslo or HTTP import."""
