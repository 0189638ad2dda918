"""Op harness cases, one module per op family; each defines CASES."""
