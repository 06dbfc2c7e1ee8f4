"""Sandbox image inputs, shipped inside the package as sandbox_runner.images."""
