"""From the proxy to the inspection: the record and its frame codec, the workers, shared counts."""
