"""Known lifecycle bugs, re-introduced into a real vLLM on demand, to prove the suite catches them.

Shipped as a vLLM general plugin (entry point group ``vllm.general_plugins``): vLLM loads it in
the API server, the engine core and every worker. It does nothing unless ``VLLM_LIFECYCLE_FAULT``
names a fault (or a spec preview); then it patches the narrowest function that fault concerns.
"""
