"""ttftscope: where time to first token goes on vLLM / OpenAI-compatible servers.

>>> import ttftscope; ttftscope.__version__
'0.1.0'
"""

from ttftscope.errors import ConfigError, RequestError, TtftscopeError
from ttftscope.records import ProbeRecord

__version__ = "0.1.0"

__all__ = ["ConfigError", "ProbeRecord", "RequestError", "TtftscopeError", "__version__"]
