"""memwarden: memory for LLM agents that stays safe when what it stores was planted by an
attacker.

Every memory records where it came from (set from the authenticated principal, never from
content), and every write, read and consequential action is gated on that record.

    import memwarden
    mw = memwarden.open("memwarden-data", principal="assistant", kind="agent")   # embedded
    mw = memwarden.connect("http://127.0.0.1:7077", api_key="mw_...")            # a server
    mw.add("Alice prefers tea", namespace="prefs")
    hits = mw.search("what does Alice drink?", namespace="prefs")
    verdict = mw.decide("pay", values=[("payee_account", "ACCT-1", "account")], amount="$10")

Also: `memwarden.Memory` (a drop-in for Mem0's `Memory`), `memwarden.langgraph.MemwardenStore`
(a LangGraph `BaseStore`), `memwarden.langchain.MemwardenEmbeddings` (the local model as a
LangChain `Embeddings`). Errors are `MemwardenError`s with the HTTP API's stable codes.
"""

from ._client import (
    BATCH_MAX,
    DEFAULT_NAMESPACE,
    DEFAULT_SESSION,
    AsyncClient,
    Client,
    Engine,
    connect,
    connect_async,
    default_model_dir,
    generate_user_key,
    open,
    open_async,
    sign_grant,
)
from ._errors import (
    Conflict,
    EmbedderFailed,
    Forbidden,
    IdentityMismatch,
    InferenceUnavailable,
    InvalidCursor,
    InvalidInput,
    LayerOff,
    MemwardenError,
    NotFound,
    RateLimited,
    Refused,
    SearchUnavailable,
    Unauthorized,
    Withheld,
    WriteRefused,
)
from .memory import AsyncMemory, Memory, MemoryNotFound
from ._native import __version__

__all__ = [
    "AsyncClient", "AsyncMemory", "BATCH_MAX", "Client", "Conflict", "DEFAULT_NAMESPACE", "DEFAULT_SESSION", "EmbedderFailed", "Engine",
    "Forbidden", "IdentityMismatch", "InferenceUnavailable", "InvalidCursor", "InvalidInput", "LayerOff", "Memory", "MemoryNotFound", "MemwardenError",
    "NotFound", "RateLimited", "Refused", "SearchUnavailable", "Unauthorized", "Withheld", "WriteRefused", "__version__", "connect", "connect_async",
    "default_model_dir", "generate_user_key", "open", "open_async", "sign_grant",
]
