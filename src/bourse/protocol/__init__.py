"""Wire models shared by the coordinator, the agent and the SDK (pydantic, versioned).

Readers ignore unknown fields, so a newer writer never breaks an older reader.
"""

from bourse.protocol.version import PROTOCOL_VERSION

__all__ = ["PROTOCOL_VERSION"]
