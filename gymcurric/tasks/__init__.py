"""tasks layer (see DESIGN.md)."""
