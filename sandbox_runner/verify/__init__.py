"""`planrun verify`: an implementation (commits and the working tree) compared with its plan."""
