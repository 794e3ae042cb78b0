"""tooltap.addon: the shell around the pure core: mitmproxy addon, stream tap, sinks, CLI."""
