"""`tooltap audit`: the same rules offline, over stored responses and recorded traffic."""
