"""The file to pass to `mitmdump -s` or `mitmweb -s` (`tooltap script-path` prints its path)."""

from tooltap.addon.proxy.addon import Tooltap
from tooltap.addon.web.annotate import WebAnnotations

# The annotations first: a stream the client broke off is read from tooltap's tap copy,
# which the proxy addon's own `error` hook then hands over to its inspector.
addons = [WebAnnotations(), Tooltap()]
