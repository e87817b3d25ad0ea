"""The unified modification interface: structured memory changes rendered into topic edits."""
