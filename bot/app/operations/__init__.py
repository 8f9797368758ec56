"""Operations on a host: deploy (gated by the checks before launch), stop, status, report."""
