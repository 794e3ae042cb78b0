"""The file to pass to `mitmdump -s` or `mitmweb -s` (`tooltap script-path` prints its path)."""

from tooltap.addon.proxy.addon import Tooltap
from tooltap.addon.web.annotate import WebAnnotations

addons = [Tooltap(), WebAnnotations()]
