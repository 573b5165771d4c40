"""Building and launching kernels: runtime compilers, compiled resources, the native launcher."""
