"""The target and occupancy model: pure functions of the target profiles (no torch)."""
