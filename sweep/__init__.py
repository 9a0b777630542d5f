"""The release sweep: the conformance suite run against several vLLM releases, one cached environment
each, and one behaviour × release matrix over their results (`python -m sweep run`)."""
