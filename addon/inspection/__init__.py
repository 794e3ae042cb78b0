"""The inspection side: the inspector process, Inspector.handle, scrubbing, one session."""
