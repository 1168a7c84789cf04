"""Debug routes for operators (admin keys only)."""
