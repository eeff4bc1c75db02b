"""Stand-ins for clocks and hardware libraries, so tests run on any machine with exact figures."""
