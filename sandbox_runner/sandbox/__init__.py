"""Sandbox layer: containers, the image, the in-container tool server and its client."""
