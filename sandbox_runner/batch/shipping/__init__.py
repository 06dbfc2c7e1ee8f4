"""A repository shipped to Ray nodes that share no disk: which of its files travel (read
without running git), packed into a tarball, and unpacked into a node's cache."""
