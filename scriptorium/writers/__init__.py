"""Writer backends: the offline verbatim writer, the LLM writer, and organizers."""
