"""Models of the juries app."""
