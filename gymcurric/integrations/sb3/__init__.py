"""integrations/sb3 layer (see DESIGN.md)."""
