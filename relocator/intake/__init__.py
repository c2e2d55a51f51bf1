"""Intake: UDP and TCP listeners for single events, and the spool directory of blobs."""
