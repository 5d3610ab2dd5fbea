"""semantics layer (see DESIGN.md)."""
