"""The Slack adapter: bolt listeners, authorization, jobs and the HTTP / Socket Mode front doors.

Handlers know nothing of sockets; everything they do goes through `ops` and the redacting sink.
"""
