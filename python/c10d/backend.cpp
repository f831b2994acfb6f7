// The c10d backend (in progress).
