"""Load engines beyond Rally's runners (the Locust engine)."""
