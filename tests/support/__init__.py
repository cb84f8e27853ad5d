"""Helpers Baton's own tests share (not shipped in the wheel)."""
