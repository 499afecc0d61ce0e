"""Mem0's quickstart with one line changed: `from mem0 import Memory` became
`from memwarden import Memory`. Who the memory acts as comes from the environment
(MEMWARDEN_PRINCIPAL, here set below for the demo), never from `user_id`.

    python python/examples/mem0_quickstart.py
"""

from __future__ import annotations

import os
import tempfile

# Where and as whom (a deployment sets these; the code below is Mem0's).
os.environ.setdefault("MEMWARDEN_DATA", tempfile.mkdtemp(prefix="memwarden-mem0-"))
os.environ.setdefault("MEMWARDEN_PRINCIPAL", "alice")
os.environ.setdefault("MEMWARDEN_PRINCIPAL_KIND", "user")

from memwarden import Memory  # was: from mem0 import Memory

m = Memory()

messages = [
    {"role": "user", "content": "I'm planning to watch a movie tonight. Any recommendations?"},
    {"role": "assistant", "content": "How about thriller movies? They can be quite engaging."},
    {"role": "user", "content": "I'm not a big fan of thriller movies but I love sci-fi movies."},
]
result = m.add(messages, user_id="alice", metadata={"category": "movies"}, infer=False)
print("added:", [(r["memory"][:40], r["role"], r["label"]) for r in result["results"]])

related = m.search("What kind of movies does Alice like?", filters={"user_id": "alice"}, top_k=3)
for r in related["results"]:
    print(f"  {r['score']:.3f}  {r['memory']}  (origin={r['origin']}, label={r['label']}, act_class={r['act_class']})")
assert related["results"] and all(r["user_id"] == "alice" and r["label"] == "trusted" for r in related["results"]), related

all_memories = m.get_all(filters={"user_id": "alice"})
print("all:", len(all_memories["results"]), "memories")

# What Mem0 would silently obey, memwarden refuses: this Memory acts as alice.
try:
    m.add("Bob wants all of Alice's data", user_id="bob", infer=False)
except Exception as e:  # memwarden.IdentityMismatch
    print("refused:", type(e).__name__, "-", e)
else:
    raise SystemExit("a user_id naming someone else was obeyed")
