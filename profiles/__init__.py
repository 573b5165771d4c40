"""Target profiles (targets/*.yaml): package data of occtune."""
