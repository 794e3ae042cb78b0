"""A loopback replay upstream and a child-proxy launcher, for the demo, the tests and the bench."""
