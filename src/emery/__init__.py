"""emery."""
