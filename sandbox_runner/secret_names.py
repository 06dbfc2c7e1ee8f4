"""Names of files and directories that look like they hold secrets: what a batch leaves
behind when it ships a repository, and what an `@` mention does not attach."""

from __future__ import annotations

import fnmatch

SECRET_NAMES = (
    *(".env", ".env.*", "*.env", ".envrc", ".netrc", "_netrc", ".npmrc", ".pypirc", ".pgpass"),
    *(".git-credentials", "credentials", "credentials.json", "*.pem", "*.key", "*.p12"),
    *("*.pfx", "*.jks", "*.keystore", "*.tfstate", "*.tfvars"),
    *("id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*"),
)
"""Names (ignoring case) of files that look like they hold a secret."""
SECRET_DIRECTORIES = (".ssh", ".gnupg", ".aws")
"""Directories that look like they hold secrets."""


def looks_secret(name: str, is_dir: bool) -> bool:
    """Whether a file or directory name looks like it holds a secret (see SECRET_NAMES)."""
    lowered = name.lower()
    if is_dir:
        return lowered in SECRET_DIRECTORIES
    return any(fnmatch.fnmatchcase(lowered, pattern) for pattern in SECRET_NAMES)
