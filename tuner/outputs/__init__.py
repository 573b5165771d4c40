"""What the engine writes: results documents, provenance, exports, reports and plots."""
