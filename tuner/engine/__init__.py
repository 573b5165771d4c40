"""The timed sweep engine: family interface, build, verify, time, select, cache, report."""
