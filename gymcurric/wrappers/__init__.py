"""wrappers layer (see DESIGN.md)."""
