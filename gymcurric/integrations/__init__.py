"""integrations layer (see DESIGN.md)."""
