"""The file to pass to `mitmdump -s` (`tooltap script-path` prints its path)."""

from tooltap.addon.proxy.addon import Tooltap

addons = [Tooltap()]
