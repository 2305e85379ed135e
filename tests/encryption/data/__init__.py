"""Stored files the encryption tests read (see each test for how they were made)."""
