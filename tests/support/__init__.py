"""Test support: real captures as exchanges, scripted upstreams, an independent corpus reader."""
