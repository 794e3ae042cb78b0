"""What runs on mitmproxy's event loop: the addon, flow selection and the stream tap."""
