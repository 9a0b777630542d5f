"""Known lifecycle bugs, re-introduced into a real vLLM on demand, to prove the suite catches them.
A vLLM general plugin, loaded in the API server, the engine core and every worker: it does
nothing unless VLLM_LIFECYCLE_FAULT names a fault (or a spec preview), and then patches the
narrowest function that fault concerns.
"""
