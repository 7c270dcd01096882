"""Clusters as data plus backends that bring them up: docker (default), local (netns), ssh."""
