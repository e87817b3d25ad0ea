"""What runs beside an agent runtime: the event publisher and transcript importers."""
