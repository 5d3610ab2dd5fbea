"""wrappers/vector layer (see DESIGN.md)."""
