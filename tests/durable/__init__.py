"""Durable turns: the journal, resume after a crash, approvals."""
