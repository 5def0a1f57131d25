"""guard package."""
