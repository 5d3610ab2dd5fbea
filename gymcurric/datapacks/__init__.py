"""datapacks layer (see DESIGN.md)."""
