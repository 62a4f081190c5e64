"""Models of the voting app."""
