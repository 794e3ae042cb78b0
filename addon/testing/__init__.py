"""tooltap in a test suite: `pytest --tooltap` reads every exchange a test makes.

clients.py watches the HTTP clients agent code uses (httpx, httpx2, botocore) without
altering what they send or receive; watch.py reads each finished exchange through
tooltap.core.inspect with the proxy's session memory, one session per test; plugin.py is
the pytest plugin (loaded by pytest, and only by pytest: nothing else imports it).
"""
