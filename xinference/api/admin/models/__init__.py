"""Launching, listing, describing, scaling and terminating models: shapes (protocol, launch_fields), the service
(serving), routes (router)."""
