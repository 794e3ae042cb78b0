"""From the proxy to the inspection: the record and its frame codec, the memory budget, the workers, the supervised inspector process, shared counts."""
