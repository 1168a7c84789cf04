"""What an assistant should know at the start of a session, without a query (`POST /v1/context`)."""
