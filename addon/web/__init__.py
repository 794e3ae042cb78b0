"""mitmweb: each turn's verdict beside its flow (a content view, a mark, a comment)."""
