"""Task state: stores and their write cache, the state directory, restore, standbys, snapshots."""
