"""What an agent runtime embeds or runs: the event publisher, the idle sweep, transcript importers.

Empty until the write pass and the cluster land.
"""
