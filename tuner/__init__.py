"""occtune: kernel autotuning and occupancy analysis for AMD Instinct and NVIDIA GPUs."""

__version__ = "0.1.0"
