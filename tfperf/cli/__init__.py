"""The `tfperf` command line. Nothing in the library imports this package."""
