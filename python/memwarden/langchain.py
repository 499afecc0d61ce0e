"""`MemwardenEmbeddings`: memwarden's local embedding model (all-MiniLM-L6-v2, run in Rust on the
CPU, no torch) as a LangChain `Embeddings`. Mem0 takes it as its embedder
(`{"embedder": {"provider": "langchain", "config": {"model": MemwardenEmbeddings()}}}`), which is
how the tests and the benchmark run Mem0 on the same model and code as memwarden."""

from __future__ import annotations

import asyncio
import os
from typing import List, Optional, Union

from langchain_core.embeddings import Embeddings

from . import _native
from ._client import default_model_dir
from ._errors import native_error

#: Texts per native call.
BATCH_TEXTS_MAX = 256


class MemwardenEmbeddings(Embeddings):
    """Unit-length 384-dimensional sentence embeddings from the local model in `model_dir`
    (default: `memwarden.default_model_dir()`, then `./models/all-MiniLM-L6-v2`)."""

    def __init__(self, model_dir: Optional[Union[str, os.PathLike]] = None):
        md = str(model_dir) if model_dir is not None else default_model_dir()
        try:
            self._native = _native.NativeEmbedder(md)
        except _native.NativeError as e:
            raise native_error(e.args) from None

    @property
    def dims(self) -> int:
        """Output dimensions."""
        return int(self._native.dims)

    def embed_documents(self, texts: List[str]) -> List[List[float]]:
        """Embed documents."""
        out: List[List[float]] = []
        try:
            for i in range(0, len(texts), BATCH_TEXTS_MAX):
                out.extend(self._native.embed(list(texts[i : i + BATCH_TEXTS_MAX])))
        except _native.NativeError as e:
            raise native_error(e.args) from None
        return out

    def embed_query(self, text: str) -> List[float]:
        """Embed a query."""
        return self.embed_documents([text])[0]

    async def aembed_documents(self, texts: List[str]) -> List[List[float]]:
        """Embed documents on a worker thread (the model releases the GIL)."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> List[float]:
        """Embed a query on a worker thread."""
        return await asyncio.to_thread(self.embed_query, text)
