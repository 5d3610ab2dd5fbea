"""safety layer (see DESIGN.md)."""
