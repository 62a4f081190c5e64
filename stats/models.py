"""Models of the stats app."""
