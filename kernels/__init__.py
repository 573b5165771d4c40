"""Kernel families tuned by occtune: one package per family."""
